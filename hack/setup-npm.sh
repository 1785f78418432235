#!/usr/bin/env bash
# Installs the npm packages of the e2e tests (hack/npm: the A2A JavaScript SDK and the
# MCP reference server, at the versions hack/npm/package-lock.json pins) with `npm ci`
# into a cache outside the work tree, keyed by the lock file, and prints the directory
# that holds their node_modules. A second run is instant. Only the npm registry is
# reached; no install script runs.
#
# Node.js 20 or later and npm are required: without them this fails with the command
# that installs them (the e2e tests must not be skipped silently).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/hack/npm"

log() { echo "setup-npm: $*" >&2; }

install_hint="install Node.js 20 or later with npm, e.g. on Debian or Ubuntu: sudo apt-get install -y nodejs npm (or from https://nodejs.org)"
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "$tool is not installed: $install_hint"
    exit 1
  fi
done
major="$(node -p 'process.versions.node.split(".")[0]')"
if (( major < 20 )); then
  log "Node.js $(node --version) is too old for the pinned packages (they need 20 or later): $install_hint"
  exit 1
fi

key="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -c1-16)"
cache="${JOURNEY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/journey-operator}/npm/$key"
stamp="$cache/.installed"

if [[ -e "$stamp" ]]; then
  echo "$cache"
  exit 0
fi

mkdir -p "$cache"
# Concurrent runs (parallel test packages, several clones) wait for one install.
exec 9>"$cache/.lock"
flock 9
if [[ -e "$stamp" ]]; then
  echo "$cache"
  exit 0
fi
log "installing $(cd "$src" && node -p 'Object.entries(require("./package.json").dependencies).map(([n, v]) => n + "@" + v).join(", ")') with npm ci (first run only)"
cp "$src/package.json" "$src/package-lock.json" "$cache/"
if ! (cd "$cache" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2); then
  log "npm ci failed in $cache"
  exit 1
fi
touch "$stamp"
echo "$cache"
