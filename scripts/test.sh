#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what it needs (pip; Debian's PostgreSQL
# for the store tests; Slurm, munge and MariaDB for the dev cluster tests; Prometheus for the
# metrics test; Chromium for the browser tests; bootstrap.sh installs Node.js for the hub's
# proxy and the Lab panel), then lint,
# types, and every test. Screenshots land in test-artifacts/. Extra arguments go to pytest.
# Tasks run as the tests' Unix accounts (created as root): the checkout and its .venv must be readable
# by other users (a clone under /root, mode 0700, is not). As root, the suite then runs from a copy in /srv.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || apt_install --no-recommends "for the store tests" postgresql
if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null || ! command -v mariadbd >/dev/null \
   || ! command -v munged >/dev/null; then
  apt_install --no-recommends "for the Slurm dev cluster tests" slurm-wlm munge slurmdbd mariadb-server
fi
# a real Prometheus scrapes the service (tests/e2e/test_metrics_prometheus.py)
[ -x /usr/bin/prometheus ] || apt_install --no-recommends "for the metrics test (a real Prometheus)" prometheus
# Playwright drives Debian's Chromium: no browser download
[ -x /usr/bin/chromium ] || apt_install "for the browser tests" chromium
command -v visudo >/dev/null || apt_install "for the deploy tests (visudo checks deploy/sudoers.d)" sudo

echo "== the checkout is usable by other accounts"
if ! python -m tacc_hub.hub.config check-shared "$PWD"; then
  if [ "$(id -u)" != 0 ] || [ -n "${TACC_TEST_COPY:-}" ] || ! command -v git >/dev/null; then
    echo "test: error: clone outside /root, e.g. /srv or /opt, and run ./scripts/test.sh from there" >&2
    exit 1
  fi
  # As root (CI), run from a copy that they can use: a clone of this checkout with its working tree's files
  # (uncommitted ones included) laid over it; the copy's .venv is kept from one run to the next.
  copy="/srv/tacc_hub-test-$(printf '%s' "$PWD" | sha256sum | cut -c1-10)"
  echo "test: running from $copy instead (this checkout's files, uncommitted ones included)" >&2
  mkdir -p /srv && chmod o+x /srv
  rm -rf "$copy.new" && git clone -q --no-hardlinks "$PWD" "$copy.new"
  git ls-files -z --cached --others --exclude-standard \
    | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$copy.new" -xf -
  [ -d "$copy/.venv" ] && mv "$copy/.venv" "$copy.new/.venv"
  rm -rf "$copy" && mv "$copy.new" "$copy" && chmod 0755 "$copy"
  TACC_TEST_COPY=1 exec "$copy/scripts/test.sh" "$@"
fi

echo "== ruff";  ruff check .
echo "== mypy";  mypy
echo "== config reference is current"
tacc-hub config-doc | diff -u docs/config.md - || { echo "docs/config.md is stale: tacc-hub config-doc > docs/config.md"; exit 1; }

echo "== pytest"
set +e
python -m pytest tests -q -p no:cacheprovider --durations=25 "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
  echo "test: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$rc"
