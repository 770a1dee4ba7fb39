"""Submit -> RUNNING on the local executor with a warm environment (target: p50 <= 150 ms).

A service with no GPUs runs ``sleep 1`` shell tasks in the base environment (no
requirements: nothing to build, the env is warm by construction; a few warm-up tasks
run first and are not counted). The tasks are submitted one after another through the
HTTP API; each sample is the client-side time from sending the POST to the first GET
/api/tasks/ID that reports "running" (polled every ~2 ms). The service's own view
(started_at - submitted_at) is printed beside it.

Baseline, same run: the raw cost of starting the same kind of process in this process,
``bash -c 'sleep 1'`` via asyncio.create_subprocess_exec (time until the call returns,
i.e. fork/exec done).

Usage: python benchmarks/bench_submit_to_running.py [--tasks 40] [--warmup 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from _common import Api, Service, header, ms, pct, ratio, verdict

TARGET_P50 = 0.150
POLL = 0.002


def spawn_baseline(n: int) -> list[float]:
    async def run() -> list[float]:
        out: list[float] = []
        procs = []
        for _ in range(n):
            t0 = time.perf_counter()
            p = await asyncio.create_subprocess_exec(
                "bash", "-c", "sleep 1", stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
            out.append(time.perf_counter() - t0)
            procs.append(p)
            await asyncio.sleep(0.02)
        for p in procs:
            if p.returncode is None:
                p.kill()
            await p.wait()
        return out

    return asyncio.run(run())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--time-budget", type=float, default=40.0, help="stop submitting after this many seconds")
    args = ap.parse_args()

    header("submit -> running (local executor, warm base env)")
    base = spawn_baseline(args.tasks)

    lat: list[float] = []
    server: list[float] = []
    with Service("--gpus=0", "--TaccHub.max_running_per_user=1000", name="s2r") as svc:
        svc.token("alice")
        svc.start()
        api = Api(svc.url, svc.token("alice"))
        code = api.upload_code()
        spec = {"name": "sleeper", "code": code, "entrypoint": {"shell": ["sleep 1"]}}
        deadline = time.monotonic() + args.time_budget
        for i in range(args.warmup + args.tasks):
            if time.monotonic() > deadline:
                print(f"time budget reached after {len(lat)} samples", flush=True)
                break
            t0 = time.perf_counter()
            status, task = api.call("POST", "/api/tasks", spec)
            if status != 201:
                raise RuntimeError(f"submit failed: {status} {task}")
            tid = task["id"]
            seen = task
            stop_at = time.monotonic() + 30
            while seen.get("status") != "running":
                if seen.get("status") in ("failed", "lost", "cancelled", "succeeded"):
                    raise RuntimeError(f"task {tid} ended before it was seen running: {seen}")
                if time.monotonic() > stop_at:
                    raise RuntimeError(f"task {tid} not running after 30 s: {seen.get('status')}")
                time.sleep(POLL)
                _, seen = api.call("GET", f"/api/tasks/{tid}")
            t1 = time.perf_counter()
            if i >= args.warmup:
                lat.append(t1 - t0)
                server.append(seen["started_at"] - seen["submitted_at"])
        time.sleep(1.1)  # let the last sleepers finish before the service stops

    if not lat:
        raise RuntimeError("no samples")
    b50 = pct(base, 50)
    p50, p90 = pct(lat, 50), pct(lat, 90)
    print(f"samples: {len(lat)} tasks (after {args.warmup} warm-up), baseline {len(base)} spawns")
    print(f"submit->running (client): p50 {ms(p50)}  p90 {ms(p90)}  max {ms(max(lat))}")
    print(f"submit->running (service started_at - submitted_at): p50 {ms(pct(server, 50))}  "
          f"p90 {ms(pct(server, 90))}  max {ms(max(server))}")
    print(f"baseline spawn bash -c 'sleep 1': p50 {ms(b50)}  p90 {ms(pct(base, 90))}  max {ms(max(base))}")
    print(f"ratio p50 client / baseline p50: {ratio(p50, b50)}")
    verdict(p50 <= TARGET_P50, f"p50 {ms(p50)} <= {ms(TARGET_P50)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
