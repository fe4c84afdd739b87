#!/usr/bin/env bash
# Installs the appliance from this checkout: dependencies from the lockfile, a build, `svc` on the PATH,
# then `svc install`. Safe to run again: it changes nothing that is already in place.
#
#   ./install.sh               install for this user (data in $SVC_HOME or ~/.svc); keeps the build
#                              tools, so `npm test` still works in this checkout
#   ./install.sh --production  the same, then removes the build tools (devDependencies): ~420 packages
#                              stay of ~990. Run `scripts/npm-ci.sh` before `npm test` afterwards.
#   ./install.sh --systemd     as root, --production and also run `svc serve` as a systemd service
#                              (data in /var/lib/svc)
#
# Extra arguments after `--` go to `svc install`, e.g. ./install.sh -- --database-url postgres://...
# SVC_BIN_DIR=DIR links svc there instead of /usr/local/bin (root) or ~/.local/bin (other users).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
systemd=false
production=false
install_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --systemd) systemd=true; production=true ;;
    --production) production=true ;;
    --) shift; install_args=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 64 ;;
  esac
  shift
done

started=$SECONDS
step_started=$SECONDS
# Bold arrows on a terminal; plain text into a log or a pipe.
if [ -t 1 ]; then arrow=$'\033[1m==>\033[0m'; else arrow='==>'; fi
say() { printf '%s %s\n' "$arrow" "$*"; }
fail() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }
took() { local s=$1; if [ "$s" -lt 60 ]; then echo "$s s"; else echo "$((s / 60)) min $((s % 60)) s"; fi; }
# A step prints its name when it starts and how long it took when it ends.
step() { say "$*"; step_started=$SECONDS; }
step_done() { printf '    took %s\n' "$(took $((SECONDS - step_started)))"; }

# Everything that can stop the install is checked before the first download or compile.
command -v node >/dev/null || fail "Node.js 20.17 or later is required: apt-get install -y nodejs (Debian 13), or https://nodejs.org."
node_version="$(node --version 2>/dev/null || true)"
IFS=. read -r node_major node_minor _ <<< "${node_version#v}"
if ! [[ "$node_major" =~ ^[0-9]+$ && "$node_minor" =~ ^[0-9]+$ ]] ||
  [ "$node_major" -lt 20 ] || { [ "$node_major" -eq 20 ] && [ "$node_minor" -lt 17 ]; }; then
  fail "Node.js 20.17 or later is required; $(command -v node) is ${node_version:-unknown}."
fi
command -v npm >/dev/null || fail "npm is required: apt-get install -y npm, or a Node.js from https://nodejs.org."
if $systemd && [ "$(id -u)" -ne 0 ]; then fail "--systemd must run as root."; fi

cd "$here"
# The build is cached by a hash of what it is made from, the dependencies by the lockfile's hash and
# whether the build tools (devDependencies) are kept: `--production` and `--systemd` remove them after the
# build, which leaves ~420 packages (~110 MB) instead of ~990 (~410 MB).
if $production; then mode=production; else mode=development; fi
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)"
source_hash="$(find bin commands migrations src package.json package-lock.json tsconfig.json -type f -print0 |
  LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
deps_state="$(cat node_modules/.install-lock-hash 2>/dev/null || true)"
need_build=true
if [ "$(cat dist/.install-source-hash 2>/dev/null || true)" = "$source_hash" ] && [ -f oclif.manifest.json ]; then
  need_build=false
fi
# npm ci runs when the build needs the whole tree and it is not there, or when the runtime tree is wrong.
need_ci=false
if $need_build; then
  [ "$deps_state" = "$lock_hash development" ] || need_ci=true
elif [ "$deps_state" != "$lock_hash $mode" ] && ! { $production && [ "$deps_state" = "$lock_hash development" ]; }; then
  need_ci=true
fi

if $need_ci; then
  # scripts/npm-ci.sh knows how sqlite3 gets built here (a prebuilt binary, or compiled with the headers
  # installed with Node); sourced, it checks now, before any step, and says what is missing. The README's
  # test command runs it too.
  # shellcheck source=scripts/npm-ci.sh
  source scripts/npm-ci.sh
  if $need_build || ! $production; then
    step "Installing dependencies from package-lock.json (npm ci)"
    scripts/npm-ci.sh
    deps_state="$lock_hash development"
  else
    step "Installing the run-time dependencies from package-lock.json (npm ci --omit=dev)"
    scripts/npm-ci.sh --omit=dev
    deps_state="$lock_hash production"
  fi
  echo "$deps_state" > node_modules/.install-lock-hash
  step_done
else
  say "Dependencies already match package-lock.json"
fi

if $need_build; then
  step "Building"
  # oclif would look for a newer version of itself in the registry (a network call and a warning).
  OCLIF_SKIP_NEW_VERSION_CHECK=true npm run --silent build
  echo "$source_hash" > dist/.install-source-hash
  step_done
else
  say "Build is up to date"
fi

if $production && [ "$deps_state" != "$lock_hash production" ]; then
  step "Removing the build tools (npm prune --omit=dev): only what svc needs at run time stays"
  npm prune --omit=dev --no-audit --no-fund
  echo "$lock_hash production" > node_modules/.install-lock-hash
  step_done
fi

if [ -n "${SVC_BIN_DIR:-}" ]; then bin_dir="$SVC_BIN_DIR"
elif [ "$(id -u)" -eq 0 ]; then bin_dir=/usr/local/bin
else bin_dir="$HOME/.local/bin"; fi
mkdir -p "$bin_dir"
if [ "$(readlink -f "$bin_dir/svc" 2>/dev/null)" != "$here/bin/run.js" ]; then
  ln -sf "$here/bin/run.js" "$bin_dir/svc"
  say "Linked $bin_dir/svc"
fi
path_hint=""
case ":$PATH:" in
  *":$bin_dir:"*) ;;
  *)
    # No process can change its parent shell's PATH: new login shells get it from ~/.profile (and from
    # ~/.bash_profile or ~/.bash_login, which bash reads instead when one exists).
    line="case \":\$PATH:\" in *\":$bin_dir:\"*) ;; *) PATH=\"$bin_dir:\$PATH\" ;; esac  # svc install.sh"
    for profile in "$HOME/.profile" "$HOME/.bash_profile" "$HOME/.bash_login"; do
      [ "$profile" = "$HOME/.profile" ] || [ -f "$profile" ] || continue
      if ! grep -qF "$line" "$profile" 2>/dev/null; then
        printf '\n%s\n' "$line" >> "$profile"
        say "Added $bin_dir to PATH in $profile"
      fi
    done
    path_hint="$bin_dir is not on this shell's PATH: open a new shell, or run: export PATH=\"$bin_dir:\$PATH\""
    ;;
esac

if $systemd; then
  export SVC_HOME=/var/lib/svc
  id svc >/dev/null 2>&1 || useradd --system --home-dir "$SVC_HOME" --shell /usr/sbin/nologin svc
  mkdir -p "$SVC_HOME"
fi

step "Running svc install"
"$here/bin/run.js" install "${install_args[@]}"
step_done

if $systemd; then
  chown -R svc:svc "$SVC_HOME"
  unit_dir="${SYSTEMD_UNIT_DIR:-/etc/systemd/system}"
  unit="$unit_dir/svc.service"
  new_unit="$(cat <<UNIT
[Unit]
Description=svc bank aggregation appliance (API, scheduler, webhook dispatcher)
After=network-online.target postgresql.service
Wants=network-online.target

[Service]
Type=simple
User=svc
Group=svc
Environment=SVC_HOME=$SVC_HOME
Environment=NODE_ENV=production
ExecStart=$(command -v node) $here/bin/run.js serve
KillSignal=SIGTERM
TimeoutStopSec=45
Restart=on-failure
RestartSec=5
NoNewPrivileges=true
ProtectSystem=full
ProtectHome=true
PrivateTmp=true
ReadWritePaths=$SVC_HOME

[Install]
WantedBy=multi-user.target
UNIT
)"
  if [ ! -f "$unit" ] || [ "$(cat "$unit")" != "$new_unit" ]; then
    printf '%s\n' "$new_unit" > "$unit"
    say "Wrote $unit"
  fi
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable --now svc.service
    say "svc.service enabled and started: systemctl status svc; journalctl -u svc -f"
  else
    say "systemd is not running here; enable the unit later with: systemctl enable --now svc"
  fi
fi

say "Done in $(took $((SECONDS - started)))."
if ! $systemd; then
  say "Start it with: bin/svc serve (from $here), or svc serve from anywhere"
  if [ -n "$path_hint" ]; then say "$path_hint"; fi
fi
