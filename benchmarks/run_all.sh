#!/usr/bin/env bash
# Run every benchmark in turn; each starts its own service on 127.0.0.1 in a temp dir and
# prints its figures, its baseline and "target met" / "TARGET MISSED".
# Exit status: non-zero only if a benchmark crashed (a missed target is not a failure).
# PYTHON: the interpreter with tacc_hub installed (default: ../.venv/bin/python, else python3 on PATH).
set -u
cd "$(dirname "$0")"
if [ -z "${PYTHON:-}" ] && [ -x ../.venv/bin/python ]; then PYTHON=../.venv/bin/python; fi  # scripts/bootstrap.sh
PYTHON="${PYTHON:-$(command -v python3)}"
crashed=()
for bench in bench_submit_to_running.py bench_submit_throughput.py bench_log_latency.py bench_tcloud_ps.py \
        bench_hostile_load.py bench_proxy.py bench_arrays.py bench_array_pass.py bench_metrics.py; do
    echo
    if ! "$PYTHON" "$bench"; then
        crashed+=("$bench")
        echo "CRASHED: $bench" >&2
    fi
done
echo
if [ ${#crashed[@]} -gt 0 ]; then
    echo "crashed: ${crashed[*]}" >&2
    exit 1
fi
echo "all benchmarks ran"
