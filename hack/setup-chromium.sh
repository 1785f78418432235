#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed for the console's browser tests
# and prints its path. It uses $CHROMIUM when set, else chromium (or chromium-browser,
# google-chrome) on PATH, else installs Debian's chromium package with apt-get (as root,
# or through sudo without a password). It fails with a message when none of that works:
# the browser tests must not be skipped silently.
set -euo pipefail

log() { echo "setup-chromium: $*" >&2; }

find_chromium() {
  if [[ -n "${CHROMIUM:-}" && -x "${CHROMIUM}" ]]; then
    echo "$CHROMIUM"
    return 0
  fi
  local name
  for name in chromium chromium-browser google-chrome-stable google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

if find_chromium; then
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  log "Chromium is not installed and apt-get is not available; install Chromium and set CHROMIUM to its path"
  exit 1
fi
sudo=""
if [[ "$(id -u)" != 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    log "Chromium is not installed and installing it needs root: run 'sudo apt-get install -y --no-install-recommends chromium fonts-liberation' or set CHROMIUM"
    exit 1
  fi
fi

# Concurrent test binaries may call this at once; apt holds its own lock, wait for it.
lock="${TMPDIR:-/tmp}/journey-operator-setup-chromium.lock"
exec 9>"$lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if find_chromium; then
  exit 0
fi
# Without the recommended packages (Mesa's GL drivers, printing, notifications, upower):
# headless Chromium renders in software and needs none of them; fonts-liberation is the
# one recommendation kept, so pages lay out text with real metrics.
log "installing Debian's chromium package with apt-get (no recommended packages)"
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends chromium fonts-liberation; } >&2; then
  log "apt-get could not install chromium"
  exit 1
fi
if ! find_chromium; then
  log "chromium was installed but is not on PATH"
  exit 1
fi
