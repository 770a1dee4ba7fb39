#!/usr/bin/env bash
# Compile the scheduler's hot modules with mypyc (tacc_hub/scheduler/native.py says which and why).
#   --if-stale  only when their sources changed since the last build (bootstrap.sh uses this)
#   --status    say whether this checkout runs them compiled, or as Python and why
#   --clean     remove the compiled modules (the scheduler then runs as Python)
# Without a C compiler or Python's headers it says so and exits 0: everything runs as Python.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --status) cmd=status ;;
  --clean) cmd=clean ;;
  --if-stale) cmd="build --if-stale" ;;
  "") cmd=build ;;
  *) echo "usage: $0 [--if-stale | --status | --clean]" >&2; exit 2 ;;
esac
# shellcheck disable=SC2086
exec .venv/bin/python -c 'import sys; from tacc_hub.scheduler import native; raise SystemExit(native.main(sys.argv[1:]))' $cmd
