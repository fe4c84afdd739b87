#!/usr/bin/env bash
# `npm ci` that works wherever install.sh works: the one place that knows how sqlite3 gets built here.
#
#   scripts/npm-ci.sh                 npm ci (every dependency, the build and test tools too)
#   scripts/npm-ci.sh --omit=dev      only the run-time dependencies
#   source scripts/npm-ci.sh          (install.sh) only the checks, in the caller's shell, before its steps
#
# sqlite3 downloads a prebuilt binary from GitHub, or else compiles itself (a minute or more), which needs a
# toolchain and Node's headers. node-gyp takes the headers from npm's nodedir, its cache or nodejs.org; on a
# machine that reaches none of those, the headers installed with Node (NodeSource's and Debian's packages
# have them) are used. Either way, what is missing is said before anything is downloaded. install.sh, the
# README's test command, CI (.ci/run) and svc upgrade's staged install (src/upgrade/stage.ts) all use this.
# Arguments go to npm ci after --no-audit --no-fund. It installs into the checkout it lies in, or into
# SVC_NPM_CI_ROOT (svc upgrade's staging directory, which holds the new package.json and lockfile).

npm_ci_say() {
  if [ -t 1 ]; then printf '\033[1m==>\033[0m %s\n' "$*"; else printf '==> %s\n' "$*"; fi
}
npm_ci_fail() { printf '%s: %s\n' "${0##*/}" "$*" >&2; exit 1; }

npm_ci_reachable() {
  node -e 'fetch(process.argv[1], { method: "HEAD", signal: AbortSignal.timeout(10000) })
    .then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$1"
}

# Exports npm_config_nodedir when sqlite3 must be compiled with the headers installed with Node; exits with
# what to install when it cannot be built at all.
npm_ci_check() {
  local sqlite_version host prebuilt node_version headers_url nodedir local_headers
  local missing=()
  sqlite_version="$(node -p "require('./package-lock.json').packages['node_modules/sqlite3'].version")"
  host="${npm_config_sqlite3_binary_host:-https://github.com/TryGhost/node-sqlite3/releases/download}"
  prebuilt="$host/v$sqlite_version/sqlite3-v$sqlite_version-napi-v6-$(node -p 'process.platform + "-" + process.arch').tar.gz"
  npm_ci_reachable "$prebuilt" && return 0
  command -v "${PYTHON:-python3}" >/dev/null || missing+=(python3)
  command -v "${MAKE:-make}" >/dev/null || missing+=(make)
  command -v "${CXX:-g++}" >/dev/null || missing+=(g++)
  if [ ${#missing[@]} -gt 0 ]; then
    npm_ci_fail "sqlite3 has to be compiled on this machine (its prebuilt binary cannot be downloaded: $prebuilt), and that needs ${missing[*]}. Install them with: apt-get install -y python3 make g++"
  fi
  node_version="$(node --version)"
  headers_url="$(node -p 'process.release.headersUrl')"
  if [ -n "${NODEJS_ORG_MIRROR:-}" ]; then headers_url="${headers_url/https:\/\/nodejs.org\/download\/release/$NODEJS_ORG_MIRROR}"; fi
  nodedir="$(npm config get nodedir 2>/dev/null || true)"
  local_headers="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"
  if { [ -z "$nodedir" ] || [ "$nodedir" = undefined ]; } &&
    [ ! -d "${XDG_CACHE_HOME:-$HOME/.cache}/node-gyp/${node_version#v}" ] && ! npm_ci_reachable "$headers_url"; then
    if [ -f "$local_headers/include/node/node_api.h" ]; then
      export npm_config_nodedir="$local_headers"
      npm_ci_say "Compiling sqlite3 with the Node.js headers in $local_headers/include/node"
    else
      npm_ci_fail "sqlite3 has to be compiled on this machine, and Node's headers can neither be downloaded ($headers_url) nor found in $local_headers/include/node. Install Node.js with its headers (NodeSource's nodejs package, or apt-get install -y libnode-dev), or set npm's nodedir."
    fi
  fi
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  # Sourced (install.sh, in its checkout): the checks now, npm ci later without repeating them.
  npm_ci_check
  export SVC_NPM_CI_CHECKED=1
  return 0
fi

set -euo pipefail
cd "${SVC_NPM_CI_ROOT:-$(dirname "${BASH_SOURCE[0]}")/..}"
[ -n "${SVC_NPM_CI_CHECKED:-}" ] || npm_ci_check
exec npm ci --no-audit --no-fund "$@"
