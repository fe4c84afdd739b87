#!/usr/bin/env bash
# Installs the appliance from this checkout: dependencies from the lockfile, a build, `svc` on the PATH,
# then `svc install`. Safe to run again: it changes nothing that is already in place.
#
#   ./install.sh               install for this user (data in $SVC_HOME or ~/.svc)
#   ./install.sh --systemd     as root: also run `svc serve` as a systemd service (data in /var/lib/svc)
#
# Extra arguments after `--` go to `svc install`, e.g. ./install.sh -- --database-url postgres://...
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
systemd=false
install_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --systemd) systemd=true ;;
    --) shift; install_args=("$@"); break ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 64 ;;
  esac
  shift
done

say() { printf '\033[1m==>\033[0m %s\n' "$*"; }
fail() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null || fail "Node.js 20.17 or later is required (apt-get install nodejs, or nodesource)."
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=17)?0:1)' \
  || fail "Node.js 20.17 or later is required; this is $(node --version)."
command -v npm >/dev/null || fail "npm is required."

if $systemd && [ "$(id -u)" -ne 0 ]; then fail "--systemd must run as root."; fi

cd "$here"
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f node_modules/.install-lock-hash ] || [ "$(cat node_modules/.install-lock-hash)" != "$lock_hash" ]; then
  say "Installing dependencies from package-lock.json"
  npm ci --no-audit --no-fund
  echo "$lock_hash" > node_modules/.install-lock-hash
else
  say "Dependencies already match package-lock.json"
fi

say "Building"
npm run --silent build

if [ "$(id -u)" -eq 0 ]; then bin_dir=/usr/local/bin; else bin_dir="$HOME/.local/bin"; fi
mkdir -p "$bin_dir"
if [ "$(readlink -f "$bin_dir/svc" 2>/dev/null)" != "$here/bin/run.js" ]; then
  ln -sf "$here/bin/run.js" "$bin_dir/svc"
  say "Linked $bin_dir/svc"
fi
case ":$PATH:" in *":$bin_dir:"*) ;; *) say "Add $bin_dir to your PATH to run svc from anywhere." ;; esac

if $systemd; then
  export SVC_HOME=/var/lib/svc
  id svc >/dev/null 2>&1 || useradd --system --home-dir "$SVC_HOME" --shell /usr/sbin/nologin svc
  mkdir -p "$SVC_HOME"
fi

say "Running svc install"
"$here/bin/run.js" install "${install_args[@]}"

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

say "Done. Start the service with: svc serve"
