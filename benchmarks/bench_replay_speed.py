"""Replay speed of the whole Philly trace: ``fifo`` and ``tacc`` side by side, pure Python and compiled.

Issue 22's target: replay (a) (the whole trace on 64 x 8 GPUs) under ``tacc`` at >= 5,000 jobs/s compiled and
>= 2,500 jobs/s pure Python, measured next to ``fifo`` in the same run. Each mode runs in its own process
(pure: ``TACC_HUB_PURE_PYTHON=1``; compiled: the build of ``scripts/build-native.sh``, which must be fresh),
one replay at a time; the modes alternate per round. Per (mode, replay, policy) it prints the best round's
CPU seconds of ``simulate`` (``time.process_time``: steadier than wall time on a shared machine), wall seconds,
jobs/s on each, the ratio of ``tacc``'s CPU time to ``fifo``'s of the same process and round (the machine's
speed cancels out), the decisions' fingerprint (as ``replay_fingerprint.py``) and, with both modes, what
compiling gains (pure CPU / compiled CPU).

Usage: python benchmarks/bench_replay_speed.py [--replays a,b] [--policies fifo,tacc] [--modes pure,compiled]
       [--rounds N] [--limit N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any

TARGETS = {"pure": 2500.0, "compiled": 5000.0}  # tacc jobs/s on replay (a)


def child(replays: list[str], policies: list[str], limit: int | None) -> None:
    """One process: every replay under every policy, one JSON line each."""
    from tacc_hub.scheduler import native
    from tacc_hub.scheduler.policies import make
    from tacc_hub.scheduler.sim import ClusterSpec, derive, load_philly, simulate
    from tacc_hub.scheduler.sim.bundled import PHILLY_TRACE, PLACEMENTS

    slowdown = derive(PLACEMENTS)
    for rp in replays:
        tenant, cluster = (None, ClusterSpec(64, 8, 4)) if rp == "a" else ("6214e9", ClusterSpec(6, 8, 0))
        jobs = load_philly(str(PHILLY_TRACE), tenant=tenant, limit=limit).jobs
        for name in policies:
            cpu, wall = time.process_time(), time.perf_counter()
            r = simulate(jobs, cluster, make(name), slowdown)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            h = hashlib.sha1()
            for x in sorted(r.records, key=lambda x: x.id):
                h.update(repr((x.id, x.first_start, x.finish, x.preemptions)).encode())
            print(json.dumps({"replay": rp, "policy": name, "jobs": len(r.records), "cpu": cpu, "wall": wall,
                              "decisions": h.hexdigest()[:12], "scheduler": native.status()}), flush=True)


def run_mode(mode: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    env = dict(os.environ)
    env.pop("TACC_HUB_PURE_PYTHON", None)
    if mode == "pure":
        env["TACC_HUB_PURE_PYTHON"] = "1"
    cmd = [sys.executable, __file__, "--child", "--replays", args.replays, "--policies", args.policies]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for r in rows:
        r["mode"] = mode
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replays", default="a", help="a: the whole trace on 64 x 8; b: VC 6214e9 alone on 6 x 8")
    ap.add_argument("--policies", default="fifo,tacc")
    ap.add_argument("--modes", default="pure,compiled")
    ap.add_argument("--rounds", type=int, default=1, help="each mode this many times, alternating; best kept")
    ap.add_argument("--limit", type=int, help="only the first N jobs of each replay")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    replays, policies = args.replays.split(","), args.policies.split(",")
    if args.child:
        child(replays, policies, args.limit)
        return
    modes = args.modes.split(",")
    t0 = time.strftime("%H:%M:%S", time.gmtime())
    best: dict[tuple[str, str, str], dict[str, Any]] = {}
    ratio: dict[tuple[str, str], float] = {}  # (mode, replay): best tacc/fifo CPU ratio of one process
    for rnd in range(args.rounds):
        for mode in modes:
            rows = run_mode(mode, args)
            by = {(r["replay"], r["policy"]): r for r in rows}
            for r in rows:
                key = (mode, str(r["replay"]), str(r["policy"]))
                if key not in best or r["cpu"] < best[key]["cpu"]:
                    best[key] = r
                print(f"  round {rnd + 1} {mode:8} {r['replay']} {r['policy']:6} CPU {r['cpu']:.2f} s "
                      f"wall {r['wall']:.2f} s  ({r['scheduler']})", file=sys.stderr, flush=True)
            for rp in replays:
                f, t = by.get((rp, "fifo")), by.get((rp, "tacc"))
                if f and t:
                    x = float(t["cpu"]) / float(f["cpu"])
                    ratio[(mode, rp)] = min(ratio.get((mode, rp), x), x)
    print(f"replay speed, {t0}-{time.strftime('%H:%M:%S', time.gmtime())} UTC, {args.rounds} round(s), "
          f"best round shown; load average at the end {os.getloadavg()[0]:.2f}")
    print(f"{'mode':9} {'replay':6} {'policy':8} {'jobs':>7} {'CPU s':>7} {'wall s':>7} {'jobs/s CPU':>11} "
          f"{'jobs/s wall':>11}  decisions     scheduler")
    for (mode, rp, pol), r in best.items():
        jobs, cpu, wall = int(r["jobs"]), float(r["cpu"]), float(r["wall"])
        print(f"{mode:9} {rp:6} {pol:8} {jobs:7,} {cpu:7.2f} {wall:7.2f} {jobs / cpu:11,.0f} {jobs / wall:11,.0f}  "
              f"{r['decisions']}  {r['scheduler']}")
    for (mode, rp), x in ratio.items():
        line = f"{mode}: replay {rp}: tacc CPU / fifo CPU (same process) x{x:.2f}"
        t = best.get((mode, rp, "tacc"))
        if t is not None and rp == "a" and not args.limit:
            speed = int(t["jobs"]) / float(t["cpu"])
            ok = "PASS" if speed >= TARGETS[mode] else "MISS"
            line += f"; tacc {speed:,.0f} jobs/s of CPU ({ok}: >= {TARGETS[mode]:,.0f})"
        print(line)
    for rp in replays:
        for pol in policies:
            p, c = best.get(("pure", rp, pol)), best.get(("compiled", rp, pol))
            if p and c:
                same = "same decisions" if p["decisions"] == c["decisions"] else "DECISIONS DIFFER"
                print(f"compiling gains on {rp} {pol}: x{p['cpu'] / c['cpu']:.2f} CPU ({same})")


if __name__ == "__main__":
    main()
