"""Log latency: a line printed by a task reaches a log-stream client (target: p50 <= 100 ms).

A task prints ``--lines`` lines, each carrying ``time.time()`` at the print, ``--gap``
seconds apart. A client follows /api/tasks/ID/logs/stream (SSE, through
``tacc_hub.client.TaccClient.stream_logs``) and records receive time - printed time per
line. Several tasks run one after another (``--tasks``) to gather enough samples.

Baseline, same run, same lines: a tight tail loop (1 ms polling) on the task's
output.log in this process - the floor set by the print, the pipe into the file and the
file itself. Both readers run at the same time on the same task.

The service runs with its default log_poll_interval (0.05 s), which sets the stream's
latency floor; see ``tacc-hub config-doc``.

Usage: python benchmarks/bench_log_latency.py [--tasks 3] [--lines 100] [--gap 0.05]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from _common import Api, Service, header, ms, pct, ratio, verdict

from tacc_hub.client import TaccClient

TARGET_P50 = 0.100

PRINTER = """
import sys, time
n, gap = int(sys.argv[1]), float(sys.argv[2])
time.sleep(0.3)
for i in range(n):
    print(f"TACCLAT {i} {time.time():.6f}", flush=True)
    time.sleep(gap)
"""


def parse_lines(buf: str, now: float, out: list[float]) -> str:
    """Record now - printed for every complete TACCLAT line in buf; return the incomplete rest."""
    *lines, rest = buf.split("\n")
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "TACCLAT":
            out.append(now - float(parts[2]))
    return rest


def tail(path: Path, stop: threading.Event, out: list[float], deadline: float) -> None:
    """Poll the file every 1 ms; timestamp each complete line when first seen."""
    buf = ""
    offset = 0
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            with path.open("rb") as fh:
                while not stop.is_set() and time.monotonic() < deadline:
                    fh.seek(offset)
                    data = fh.read()
                    if data:
                        now = time.time()
                        offset += len(data)
                        buf = parse_lines(buf + data.decode("utf-8", "replace"), now, out)
                    else:
                        time.sleep(0.001)
        except FileNotFoundError:
            time.sleep(0.001)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--lines", type=int, default=100)
    ap.add_argument("--gap", type=float, default=0.05)
    args = ap.parse_args()

    header(f"log latency ({args.tasks} task(s) x {args.lines} lines, {ms(args.gap)} apart)")
    stream: list[float] = []
    floor: list[float] = []
    budget = time.monotonic() + 50
    with Service("--gpus=0", name="logs") as svc:
        token = svc.token("alice")
        svc.start()
        api = Api(svc.url, token)
        code = api.upload_code({"printer.py": PRINTER})
        client = TaccClient(svc.url, token)
        for _ in range(args.tasks):
            if time.monotonic() > budget:
                print("time budget reached; fewer tasks than asked", flush=True)
                break
            status, task = api.call("POST", "/api/tasks", {
                "name": "printer", "code": code,
                "entrypoint": {"argv": ["python", "printer.py", str(args.lines), str(args.gap)]}})
            if status != 201:
                raise RuntimeError(f"submit failed: {status} {task}")
            tid = task["id"]
            deadline = time.monotonic() + 10 + args.lines * args.gap * 3
            stop = threading.Event()
            tailer = threading.Thread(target=tail, args=(svc.state_dir / "tasks" / str(tid) / "output.log", stop,
                                                         floor, deadline), daemon=True)
            tailer.start()
            buf = ""
            final = "?"
            got_before = len(stream)
            for event, data in client.stream_logs(tid):
                now = time.time()
                if event == "log":
                    buf = parse_lines(buf + data["data"], now, stream)
                elif event == "end":
                    final = data["status"]
                    break
                if time.monotonic() > deadline:
                    print(f"task {tid}: stream deadline reached", flush=True)
                    break
            stop.set()
            tailer.join(5)
            print(f"task {tid}: {final}, {len(stream) - got_before} lines over the stream", flush=True)
        client.close()

    if not stream or not floor:
        raise RuntimeError(f"no samples (stream {len(stream)}, tail {len(floor)})")
    s50, f50 = pct(stream, 50), pct(floor, 50)
    print(f"samples: stream {len(stream)} lines, file tail {len(floor)} lines")
    print(f"log stream (SSE) latency: p50 {ms(s50)}  p90 {ms(pct(stream, 90))}  p99 {ms(pct(stream, 99))}  "
          f"max {ms(max(stream))}")
    print(f"baseline file tail (1 ms poll): p50 {ms(f50)}  p90 {ms(pct(floor, 90))}  p99 {ms(pct(floor, 99))}  "
          f"max {ms(max(floor))}")
    print(f"ratio stream/tail: p50 {ratio(s50, f50)}, p99 {ratio(pct(stream, 99), pct(floor, 99))} "
          f"(difference at p50: {ms(s50 - f50)})")
    verdict(s50 <= TARGET_P50, f"p50 {ms(s50)} <= {ms(TARGET_P50)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
