"""Submitting a 1,000-element array in one request (target: <= 1 s), against 1,000 single submissions.

A real service (``tacc-hub serve``, SQLite, 1 GPU). So that nothing runs meanwhile, a blocker task
(``sleep 600``, 1 GPU) holds the GPU and every submitted task asks for 1 GPU: they all wait, as a
sweep submitted to a busy cluster does. The array is one POST /api/tasks whose spec carries
``array: {values: [0..999]}`` and an argv item ``--seed={value}``: the service expands it, compiles
and checks every element, and stores them in one transaction. Timed from the request to its 201, as
the client sees it; done ``--repeat`` times (each array adds 1,000 more waiting tasks), the median
printed and checked.

Baseline in the same run: the same 1,000 tasks as 1,000 single POST /api/tasks, one after the other
on one keep-alive connection (what a loop over ``tcloud submit`` would at best cost, without the
CLI's start-up), each spec with its own ``--seed=N``.

Usage: python benchmarks/bench_arrays.py [--size 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from _common import Api, Service, header, ms, ratio, verdict

TARGET_S = 1.0


def spec(code: dict[str, str], argv_seed: str, **extra: object) -> dict[str, object]:
    return {"name": "sweep", "code": code, "entrypoint": {"argv": ["python3", "main.py", f"--seed={argv_seed}"]},
            "resources": {"gpus_per_node": 1, "time_limit": "1h"}, **extra}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.size
    header(f"array submit: {n:,} elements in one request vs {n:,} single submissions (real service, SQLite)")
    with Service("--gpus=1", "--log-level=WARN", name="arrays") as svc:
        svc.token("alice")
        svc.start()
        api = Api(svc.url, svc.token("alice"))
        code = api.upload_code({"main.py": "import sys\nprint(sys.argv)\n"})
        status, blocker = api.call("POST", "/api/tasks", {
            "name": "blocker", "code": code, "entrypoint": {"shell": ["sleep 600"]},
            "resources": {"gpus_per_node": 1}})
        if status != 201:
            raise RuntimeError(f"blocker submit failed: {status} {blocker}")
        api.wait_status(blocker["id"], {"running"}, timeout=30)
        # warm-up: one small array and one single (first-request costs: imports, caches, the DB's pages)
        for body in (spec(code, "{value}", array={"values": [0, 1]}), spec(code, "0")):
            status, out = api.call("POST", "/api/tasks", body)
            if status != 201:
                raise RuntimeError(f"warm-up submit failed: {status} {out}")

        array_times: list[float] = []
        singles = 0.0
        single_lat: list[float] = []
        for k in range(args.repeat):
            t0 = time.perf_counter()
            status, out = api.call("POST", "/api/tasks", spec(code, "{value}", array={"values": list(range(n))}))
            dt = time.perf_counter() - t0
            if status != 201:
                raise RuntimeError(f"array submit failed: {status} {str(out)[:500]}")
            array_times.append(dt)
            aid = out["array"]["id"]
            status, arr = api.call("GET", f"/api/arrays/{aid}?state=pending")
            assert status == 200 and arr["size"] == n and len(arr["tasks"]) == n, (status, str(arr)[:300])
            print(f"  array {k + 1}: {n:,} elements in one request: {ms(dt)} (array {aid}, all {n:,} stored and "
                  "waiting)", flush=True)
            if k == 0:  # the baseline between the first and the other arrays: both see a growing table
                t0 = time.perf_counter()
                for i in range(n):
                    t1 = time.perf_counter()
                    status, out = api.call("POST", "/api/tasks", spec(code, str(i)))
                    single_lat.append(time.perf_counter() - t1)
                    if status != 201:
                        raise RuntimeError(f"single submit {i} failed: {status} {out}")
                singles = time.perf_counter() - t0
                print(f"  baseline: {n:,} single submissions: {ms(singles)} "
                      f"({ms(statistics.median(single_lat))} each at the median)", flush=True)
        _, pending = api.call("GET", "/api/tasks?limit=1&state=pending")
        print(f"  tasks waiting at the end: {pending['total']:,} (= {args.repeat} x {n:,} + {n:,} singles + 3 warm-up)")
    med = statistics.median(array_times)
    print(f"array (median of {args.repeat}) {ms(med)} vs {n:,} singles {ms(singles)}: "
          f"one request is {ratio(singles, med)} faster; per element {med / n * 1e6:.0f} us vs "
          f"{singles / n * 1e6:.0f} us")
    verdict(med <= TARGET_S, f"{n:,}-element array in one request: {ms(med)} <= {TARGET_S * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
