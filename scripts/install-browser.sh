#!/usr/bin/env bash
# Installs Debian's `chromium` package, the browser the backupd status-page
# test drives through playwright-core (executablePath /usr/bin/chromium).
# Idempotent: does nothing when /usr/bin/chromium is already there. Needs root
# or sudo (apt-get); on a machine without apt-get it says so and fails.
set -euo pipefail

browser=/usr/bin/chromium
if [ -x "$browser" ]; then
  echo "browser: $browser already installed ($("$browser" --version 2>/dev/null || echo 'version unknown'))"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "browser: apt-get not found; install Debian's chromium package by other means (it must provide $browser)" >&2
  exit 1
fi
run_as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    run_as_root=(sudo)
  else
    echo "browser: apt-get needs root and sudo is not available" >&2
    exit 1
  fi
fi
echo "browser: installing chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
"${run_as_root[@]}" apt-get update -qq
"${run_as_root[@]}" apt-get install -y -qq --no-install-recommends chromium
if [ ! -x "$browser" ]; then
  echo "browser: chromium was installed but $browser is missing" >&2
  exit 1
fi
echo "browser: installed $("$browser" --version 2>/dev/null || echo "$browser")"
