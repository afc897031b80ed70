#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs it all.
#  - Python packages from requirements-dev.txt (pip)
#  - Chromium from Debian's packages for the browser tests (Playwright drives it;
#    no browser is downloaded by Playwright itself)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
python3 -m pytest "$@"
