"""What a Prometheus scrape of ``/metrics`` costs with 10,000 tasks in the store (target: p99 <= 20 ms).

A scrape computes the state gauges from the controller's in-memory view (queue by reason, GPUs by node,
switch, group and user) plus one grouped count of the store's tasks, then renders the exposition
(``generate_latest`` of the service's registry: ``service/metrics.py``). Measured here, in process, on a
real controller (fake executor: 128 nodes x 8 GPUs, 4 nodes per switch; SQLite store) holding 10 arrays
of 1,000 one-GPU tasks: 1,024 running, the rest waiting with their queue explanations. Each scrape is
timed alone (nothing else runs on the loop meanwhile). A scrape reuses the queue's explanations when they
are at most ``EXPLAIN_MAX_AGE`` seconds old (the API's reads keep them so on a busy service); every other
scrape here finds them older and computes them: those are printed apart (``+ explanation``).

Baseline in the same run: the same scrapes of an empty service. Also printed: the exposition's size.

Usage: python benchmarks/bench_metrics.py [--scrapes 50]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import header, ms, pct, ratio, verdict
from prometheus_client.exposition import generate_latest

from tacc_hub.compiler import SiteProfile
from tacc_hub.executors import FakeExecutor
from tacc_hub.scheduler import Node
from tacc_hub.scheduler.policies import make
from tacc_hub.schema import spec_from_data
from tacc_hub.service.controller import Controller
from tacc_hub.service.metrics import EXPLAIN_MAX_AGE, Metrics
from tacc_hub.snapshot import CodeStore, digest_of, pack

NODES, GPUS, PER_SWITCH, ARRAYS, SIZE = 128, 8, 4, 10, 1000
TARGET_S = 0.020


async def scrapes(tasks: bool, n: int) -> tuple[list[float], int]:
    tmp = Path(tempfile.mkdtemp(prefix="tacc-bench-metrics-"))
    try:
        from tacc_hub.store import Store

        store = Store(f"sqlite:///{tmp / 'db.sqlite'}")
        store.migrate()
        codes = CodeStore(tmp / "code")
        src = tmp / "src"
        src.mkdir()
        (src / "train.py").write_text("print(1)\n")
        data = pack(src)
        digest = digest_of(data)
        codes.put(digest, data)
        site = SiteProfile(pythons={"3.11": sys.executable}, default_python="3.11", env_root=str(tmp / "envs"),
                           code_root=str(tmp / "code"), max_gpus_per_node=GPUS)
        ex = FakeExecutor(gpus=GPUS, nodes=NODES)
        ex._nodes = [Node(f"n{i:03d}", GPUS, switch=f"s{i // PER_SWITCH:02d}") for i in range(NODES)]
        ctl = Controller(store, ex, site, make("tacc"), codes, poll_interval=30.0, max_running_per_user=None)
        metrics = Metrics()
        metrics.watch(ctl, "month")
        await ctl.start()
        try:
            if tasks:
                for u in range(ARRAYS):
                    spec = {"name": f"sweep{u}", "code": {"kind": "snapshot", "digest": digest},
                            "entrypoint": {"argv": ["python", "train.py", "--seed={value}"]},
                            "resources": {"gpus_per_node": 1, "time_limit": "4h"},
                            "array": {"values": list(range(SIZE))}}
                    await ctl.submit_array(f"user{u}", spec_from_data(spec))
                deadline = time.monotonic() + 120
                while len(ctl.queue.running) < NODES * GPUS and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.5)
            generate_latest(metrics.registry)  # warm-up
            took: list[float] = []
            fresh: list[float] = []
            size = 0
            for i in range(2 * n):
                ctl._changed = True  # as after any change
                if i % 2:  # the explanations older than EXPLAIN_MAX_AGE: this scrape computes them
                    ctl._explained_at -= EXPLAIN_MAX_AGE + 1
                t = time.perf_counter()
                size = len(generate_latest(metrics.registry))
                (fresh if i % 2 else took).append(time.perf_counter() - t)
                await asyncio.sleep(0.01)
            return took, fresh, size
        finally:
            await ctl.stop()
            store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scrapes", type=int, default=50)
    args = ap.parse_args()
    header(f"/metrics scrape: {ARRAYS * SIZE} tasks ({NODES * GPUS} GPUs) vs an empty service")
    empty, _, empty_size = asyncio.run(scrapes(False, args.scrapes))
    full, explaining, full_size = asyncio.run(scrapes(True, args.scrapes))
    for name, xs, size in (("empty", empty, empty_size), ("10,000 tasks", full, full_size),
                           ("+ explanation", explaining, full_size)):
        print(f"{name:>13}: p50 {ms(statistics.median(xs))}, p99 {ms(pct(xs, 99))}, max {ms(max(xs))}; "
              f"{size / 1024:.1f} KiB exposition")
    print(f"ratio (p50, 10,000 tasks / empty): {ratio(statistics.median(full), statistics.median(empty))}; "
          f"with the queue's explanation computed: {ratio(statistics.median(explaining), statistics.median(empty))}")
    verdict(pct(full, 99) <= TARGET_S, f"scrape p99 <= {ms(TARGET_S)} with 10,000 tasks (explanations cached)")


if __name__ == "__main__":
    main()
