#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs (pip; Debian's PostgreSQL
# for the store tests; Slurm, munge and MariaDB for the dev cluster tests; Chromium for the
# browser tests; bootstrap.sh installs Node.js for the hub's proxy and the Lab panel), then lint,
# types, and every test. Screenshots land in test-artifacts/. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "test: installing PostgreSQL (Debian package) for the store tests"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq postgresql >/dev/null; fi
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null || ! command -v mariadbd >/dev/null \
   || ! command -v munged >/dev/null; then
  echo "test: installing Slurm, munge, MariaDB (Debian packages) for the Slurm dev cluster tests"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq slurm-wlm munge slurmdbd mariadb-server >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq slurm-wlm munge slurmdbd mariadb-server >/dev/null; fi
fi

if ! [ -x /usr/bin/chromium ]; then
  echo "test: installing Chromium (Debian package) for the browser tests (Playwright drives it; no download)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null; fi
fi

echo "== ruff";  ruff check .
echo "== mypy";  mypy
echo "== config reference is current"
tacc-hub config-doc | diff -u docs/config.md - || { echo "docs/config.md is stale: tacc-hub config-doc > docs/config.md"; exit 1; }

echo "== pytest"
set +e
python -m pytest tests -q -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "test: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$rc"
