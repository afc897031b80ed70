#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs it all.
#  - Python packages from requirements-dev.txt (pip)
#  - Chromium from Debian's packages for the browser tests (Playwright drives it;
#    no browser is downloaded by Playwright itself)
#  - PostgreSQL from Debian's packages for the actuals report tests (tests/pg_support.py starts
#    a throwaway server itself; no service is enabled)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
pg_found() {
  command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1 && return 0
  ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1
}
if ! pg_found; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
# Two workers, each running whole test files (module fixtures such as a browser or a server stay in one
# process): the suite spends much of its time waiting on Chromium, servers and subprocesses, so two
# workers on two cores roughly halve it. TEST_WORKERS=0 runs it in one process.
python3 -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile "$@"
