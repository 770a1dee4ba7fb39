"""One scheduling pass of the controller with 10 arrays of 1,000 waiting elements on 1,024 GPUs (target: p99 <= 20 ms).

The controller is the service's own (``tacc_hub.service.controller.Controller``: its loop, the
``tacc`` policy through ``LiveQueue``, the gate that holds an array's elements over ``max_running``
and those whose dependencies are not met), on a SQLite store in a temp dir, with the fake executor
(``tacc_hub.executors.fake``) as its cluster: 128 nodes x 8 GPUs, 4 nodes per switch. Ten users each
submit one array of 1-GPU elements (``submit_array``: one request each), sized so that once the
cluster has filled, 1,000 elements of each wait. Then, pass after pass, a few running elements end
(the fake executor reports their exit) and the controller's loop wakes, observes the ends, lets
waiting elements through the gate, and runs its pass. Three times are printed: the decision
(``LiveQueue.plan``: the policy and its checks, what bench_live_pass times), the pass (``schedule()``:
the decision plus each start's store write) and the whole wake-up (``tick()``: the ends observed and
written, the gate, the pass).

Three runs, same machine, same order of ends:
- ``singles`` (the baseline): the same 10,000-odd tasks submitted one by one, no array;
- ``arrays``: 10 arrays, no ``max_running``;
- ``arrays max_running 50``: 10 arrays of which at most 50 elements each run at once (the rest gated).
The garbage collector collects and freezes after the set-up, as the service does (gcpause). The run-time
history starts with 2,000 completed runs (``--history``; what the service reads from its store at start):
the ``tacc`` policy rebuilds its model, re-ranking every waiting task, each time the history has grown
by 5% (+8), so on an empty history it would do so every 8 ends, an artefact of a new service. The
first 5 passes after the set-up are run and not timed.

Usage: python benchmarks/bench_array_pass.py [--passes 200] [--max-running 50]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import header, ms, pct, ratio, verdict

from tacc_hub.compiler import SiteProfile
from tacc_hub.executors import FakeExecutor
from tacc_hub.scheduler import Node, native
from tacc_hub.scheduler.policies import make
from tacc_hub.schema import spec_from_data
from tacc_hub.service.controller import Controller
from tacc_hub.service.gcpause import refreeze
from tacc_hub.snapshot import CodeStore, digest_of, pack
from tacc_hub.store import Store, TaskStatus

NODES, GPUS, PER_SWITCH, ARRAYS, WAITING = 128, 8, 4, 10, 1000
WARMUP = 5  # passes run and not timed after the set-up
S = TaskStatus


def controller(tmp: Path, policy: str) -> tuple[Controller, FakeExecutor, str]:
    store = Store(f"sqlite:///{tmp / 'db.sqlite'}")
    store.migrate()
    codes = CodeStore(tmp / "code")
    src = tmp / "src"
    src.mkdir()
    (src / "train.py").write_text("print(1)\n")
    data = pack(src)
    codes.put(digest_of(data), data)
    site = SiteProfile(pythons={"3.11": sys.executable}, default_python="3.11", env_root=str(tmp / "envs"),
                       code_root=str(tmp / "code"), max_gpus_per_node=GPUS)
    ex = FakeExecutor(gpus=GPUS, nodes=NODES)
    ex._nodes = [Node(f"n{i:03d}", GPUS, switch=f"s{i // PER_SWITCH:02d}") for i in range(NODES)]
    # poll_interval: long, so that the passes timed are the ones woken by an end (as the executor wakes it)
    ctl = Controller(store, ex, site, make(policy), codes, poll_interval=30.0, max_running_per_user=None)
    return ctl, ex, digest_of(data)


def spec_data(digest: str, user: int, argv_tail: str) -> dict[str, Any]:
    return {"name": f"sweep{user}", "code": {"kind": "snapshot", "digest": digest},
            "entrypoint": {"argv": ["python", "train.py", f"--seed={argv_tail}"]},
            "resources": {"gpus_per_node": 1, "time_limit": "4h"}}


class TimedQueue:
    """The controller's LiveQueue (compiled: its methods cannot be wrapped), with ``plan`` timed."""

    def __init__(self, q: Any, sink: list[float]) -> None:
        self._q = q
        self._sink = sink
        self.shapes: list[tuple[int, int, int]] = []

    def plan(self, *a: Any, **k: Any) -> Any:
        import gc
        g0 = gc.get_stats()
        t = time.perf_counter()
        out = self._q.plan(*a, **k)
        self._sink.append(time.perf_counter() - t)
        g1 = gc.get_stats()
        self.shapes.append((len(out.starts), len(out.preempts), len(self._q.waiting),
                            tuple(b["collections"] - a_["collections"] for a_, b in zip(g0, g1, strict=True))))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._q, name)


async def until(pred: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError("the controller did not get there in time")
        await asyncio.sleep(0.005)


async def run(mode: str, passes: int, max_running: int, policy: str, history: int, seed: int = 1) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tacc-array-pass-"))
    try:
        ctl, ex, digest = controller(tmp, policy)
        await ctl.start()
        try:
            hrng = random.Random(seed)
            for _ in range(history):  # run times the service learnt from its store at start (_learn_history)
                ctl.queue.history.observe("default", hrng.lognormvariate(7.1, 2.0))
            running_cap = NODES * GPUS if mode != "max" else min(NODES * GPUS, ARRAYS * max_running)
            size = WAITING + -(-running_cap // ARRAYS)  # 1,000 wait once the cluster (or the caps) are full
            t0 = time.perf_counter()
            for u in range(ARRAYS):
                owner = f"user{u}"
                if mode == "singles":
                    for i in range(size):
                        await ctl.submit(owner, spec_from_data(spec_data(digest, u, str(i))))
                else:
                    arr: dict[str, Any] = {"values": list(range(size))}
                    if mode == "max":
                        arr["max_running"] = max_running
                    await ctl.submit_array(owner, spec_from_data({**spec_data(digest, u, "{value}"), "array": arr}))
            submit_s = time.perf_counter() - t0
            await until(lambda: sum(1 for lv in ctl.live.values() if lv.status == S.RUNNING) >= running_cap - 8,
                        timeout=120)
            await asyncio.sleep(0.2)
            pending = ctl.store.count_tasks(None, [S.PENDING]) if hasattr(ctl.store, "count_tasks") else None
            refreeze()

            pass_t: list[float] = []
            tick_t: list[float] = []
            sched, tick = ctl.schedule, ctl.tick

            def timed_schedule() -> None:
                if not ctl.queue.waiting:
                    return sched()
                t = time.perf_counter()
                try:
                    return sched()
                finally:
                    pass_t.append(time.perf_counter() - t)

            async def timed_tick() -> None:
                t = time.perf_counter()
                try:
                    await tick()
                finally:
                    tick_t.append(time.perf_counter() - t)

            plan_t: list[float] = []
            tq = TimedQueue(ctl.queue, plan_t)
            ctl.queue = tq  # type: ignore[assignment]
            ctl.schedule = timed_schedule  # type: ignore[method-assign]
            ctl.tick = timed_tick  # type: ignore[method-assign]
            rng = random.Random(seed)
            ended = 0
            for k in range(WARMUP + passes):
                if k == WARMUP:  # the first passes after the set-up are not steady state (as bench_scheduler_pass)
                    for xs in (pass_t, tick_t, plan_t, tq.shapes):
                        xs.clear()
                running = sorted(t for t, lv in ctl.live.items() if lv.status == S.RUNNING and not lv.busy)
                done = rng.sample(running, min(len(running), rng.randint(1, 4)))
                before = len(tick_t)
                for tid in done:
                    ex.finish(tid, 0)  # wakes the controller
                ended += len(done)
                await until(lambda b=before, d=done: len(tick_t) > b and all(t not in ctl.live for t in d),  # type: ignore[misc]
                            timeout=120)
                await until(lambda: not any(lv.busy for lv in ctl.live.values()), timeout=120)  # launches done
            waiting_now = len(ctl.queue.waiting)
            gated = len(getattr(ctl, "gated", ()) or ())
            still = sum(1 for lv in ctl.live.values() if lv.status == S.RUNNING)
        finally:
            await ctl.stop()
        return {"pass": pass_t, "tick": tick_t, "plan": plan_t, "shapes": tq.shapes,
                "submit_s": submit_s, "size": size, "ended": ended,
                "queue_waiting": waiting_now, "gated": gated, "running": still, "pending": pending}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=200)
    ap.add_argument("--max-running", type=int, default=50)
    ap.add_argument("--policy", default="tacc")
    ap.add_argument("--history", type=int, default=2000,
                    help="completed runs in the history at start (the service learns its last 2,000 at start)")
    ap.add_argument("--only", choices=["singles", "arrays", "max"], help="one run only (no ratio)")
    args = ap.parse_args()
    header(f"controller pass: {ARRAYS} arrays x {WAITING:,} waiting elements, {NODES * GPUS:,} GPUs ({NODES} nodes x "
           f"{GPUS}, {PER_SWITCH}/switch), policy {args.policy}, fake executor; scheduler {native.status()}")
    results = {}
    for mode, label in (("singles", "singles (baseline)"), ("arrays", "arrays"),
                        ("max", f"arrays max_running {args.max_running}")):
        if args.only and mode != args.only:
            continue
        r = asyncio.run(run(mode, args.passes, args.max_running, args.policy, args.history))
        results[mode] = r
        if args.only:
            order = sorted(range(len(r["plan"])), key=lambda i: r["plan"][i])
            print("  slowest plans (ms, starts, preempts, waiting, gc collections per generation)",
                  [(round(r["plan"][i] * 1000), *r["shapes"][i]) for i in order[-6:]])
        print(f"  {label}:", flush=True)
        for what, xs in (("decision (LiveQueue.plan)", r["plan"]), ("pass (schedule(): + starts)", r["pass"]),
                         ("wake-up (tick(): + ends, gate)", r["tick"])):
            print(f"    {what:31s} p50 {ms(pct(xs, 50))}  p95 {ms(pct(xs, 95))}  p99 {ms(pct(xs, 99))}  "
                  f"max {ms(max(xs) if xs else 0)}  ({len(xs)})", flush=True)
        print(f"    {ARRAYS} x {r['size']:,} submitted in {r['submit_s']:.2f} s; at the end {r['running']:,} running, "
              f"{r['queue_waiting']:,} in the policy's queue, {r['gated']:,} gated; {r['ended']:,} ended during the "
              "passes", flush=True)
    if args.only:
        return 0
    for key, what in (("plan", "decision"), ("pass", "pass")):
        base = pct(results["singles"][key], 99)
        for mode, label in (("arrays", "arrays"), ("max", f"max_running {args.max_running}")):
            print(f"  {what} p99, {label} / singles: {ratio(pct(results[mode][key], 99), base)}")
    for key, what in (("plan", "decision (LiveQueue.plan, as bench_live_pass)"),
                      ("pass", "controller pass (with its starts' store writes)")):
        ok = all(results[m][key] and pct(results[m][key], 99) <= 0.020 for m in ("arrays", "max"))
        verdict(ok, f"{what} p99 <= 20 ms with 10 arrays (without and with max_running): "
                f"{ms(pct(results['arrays'][key], 99))}, {ms(pct(results['max'][key], 99))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
