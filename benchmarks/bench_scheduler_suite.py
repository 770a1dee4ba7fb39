"""The scheduler suite (issue 22): every workload of ``sim.workloads`` under every policy, and tacc's targets.

Workloads (``tacc_hub/scheduler/sim/workloads.py``): each Philly virtual cluster of the issue with >= 300
jobs alone on 8-GPU nodes sized for 90% mean GPU demand, the whole trace on 64 x 8, and the synthetic
ones of ``sim/synth.py`` (their parameters are printed). Per workload and policy it prints avg / median /
p99 JCT and queueing delay, utilization, the median and the worst of the per-tenant median slowdowns,
the worst tenant's slowdown against fifo's, preemptions and the replay's speed; then tacc's targets with
PASS/MISS: avg JCT <= 0.85x tiresias's, p99 JCT <= 1.0x tiresias's, no tenant's median slowdown worse
than under fifo, avg JCT <= 2x the oracle's; and at the end how many workloads pass each target.
Nothing is tuned per workload: every policy runs with its defaults.

Usage: python benchmarks/bench_scheduler_suite.py [--workloads a,b] [--policies fifo,...] [--workers N]
       [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from statistics import median
from typing import Any

from tacc_hub.scheduler import native
from tacc_hub.scheduler.policies import POLICIES as REGISTERED
from tacc_hub.scheduler.sim.metrics import percentile
from tacc_hub.scheduler.sim.workloads import NAMES, Workload, replay, suite, workload

POLICIES = ("fifo", "slurm", "tiresias", "srpt-oracle", "tacc")
ORACLE = "srpt-oracle"
TARGETS = (
    ("avg_vs_tiresias", "tacc avg JCT <= 0.85x tiresias"),
    ("p99_vs_tiresias", "tacc p99 JCT <= 1.0x tiresias"),
    ("tenants_vs_fifo", "no tenant's median slowdown worse than under fifo"),
    ("avg_vs_oracle", "tacc avg JCT <= 2.0x srpt-oracle"),
)
_cache: dict[tuple[str, bool], Workload] = {}


def _workload(name: str, quick: bool) -> Workload:
    if (name, quick) not in _cache:
        _cache.clear()  # one at a time per worker: the whole trace is large
        _cache[(name, quick)] = workload(name, quick)
    return _cache[(name, quick)]


def run_one(name: str, quick: bool, policy: str, **kwargs: Any) -> dict[str, Any]:
    """One replay (the policy built with ``kwargs``), summarized as plain data (the records stay in the worker)."""
    w = _workload(name, quick)
    r = replay(w, policy, **kwargs)
    m = r.metrics
    queue = sorted(max(0.0, x.finish - x.submit - x.run_time) for x in r.records)
    return {
        "workload": name, "policy": policy, "jobs": len(r.records), "unschedulable": r.unschedulable,
        "avg_jct": m.avg_jct, "median_jct": m.median_jct, "p99_jct": m.p99_jct,
        "avg_queue": m.avg_queue, "median_queue": percentile(queue, 50), "p99_queue": m.p99_queue,
        "utilization": m.utilization, "makespan": m.makespan, "preemptions": m.preemptions,
        "spread_starts": r.spread_starts, "tenant_slowdown": m.tenant_slowdown, "wall_s": r.wall_s,
        "jobs_per_s": r.jobs_per_s, "calls": r.calls,
    }


def worst_vs_fifo(res: dict[str, Any], fifo: dict[str, Any] | None) -> tuple[str, float] | None:
    """The tenant whose median slowdown grew most against fifo's, and by how much (x)."""
    if fifo is None:
        return None
    ratios = [(t, s / fifo["tenant_slowdown"][t]) for t, s in res["tenant_slowdown"].items()
              if fifo["tenant_slowdown"].get(t, 0) > 0]
    return max(ratios, key=lambda x: x[1]) if ratios else None


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    fifo = next((r for r in rows if r["policy"] == "fifo"), None)
    head = ["policy", "avg JCT h", "med JCT h", "p99 JCT h", "avg queue h", "med queue h", "p99 queue h", "util %",
            "slowdown med", "slowdown max", "worst tenant vs fifo", "preempt", "jobs/s", "replay s"]
    body = []
    for r in rows:
        sd = list(r["tenant_slowdown"].values())
        worst = worst_vs_fifo(r, fifo)
        body.append([r["policy"], *(_fmt(r[k] / 3600) for k in ("avg_jct", "median_jct", "p99_jct", "avg_queue",
                                                                 "median_queue", "p99_queue")),
                     _fmt(100 * r["utilization"]), _fmt(median(sd) if sd else 0.0), _fmt(max(sd, default=0.0)),
                     f"x{worst[1]:.2f} ({worst[0]})" if worst else "-", str(r["preemptions"]),
                     f"{r['jobs_per_s']:,.0f}", f"{r['wall_s']:.1f}"])
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths,
                                                                                                  strict=True)))
                     for row in [head, *body])


def targets(by: dict[str, dict[str, Any]]) -> dict[str, tuple[bool, str]]:
    """tacc's targets on one workload: key -> (pass, what), for those whose baselines were replayed."""
    t = by.get("tacc")
    out: dict[str, tuple[bool, str]] = {}
    if t is None:
        return out
    if "tiresias" in by:
        x = t["avg_jct"] / by["tiresias"]["avg_jct"]
        out["avg_vs_tiresias"] = (x <= 0.85, f"x{x:.2f}")
        x = t["p99_jct"] / by["tiresias"]["p99_jct"]
        out["p99_vs_tiresias"] = (x <= 1.0, f"x{x:.2f}")
    if "fifo" in by:
        fifo = by["fifo"]["tenant_slowdown"]
        worse = {k: (v, fifo[k]) for k, v in t["tenant_slowdown"].items() if k in fifo and v > fifo[k]}
        out["tenants_vs_fifo"] = (not worse, ", ".join(f"{k} {a:.2f} > {b:.2f}" for k, (a, b) in worse.items())
                                  or f"{len(t['tenant_slowdown'])} tenant(s), none worse")
    if ORACLE in by:
        x = t["avg_jct"] / by[ORACLE]["avg_jct"]
        out["avg_vs_oracle"] = (x <= 2.0, f"x{x:.2f}")
    return out


def report(w: Workload, rows: list[dict[str, Any]]) -> dict[str, tuple[bool, str]]:
    c = w.cluster
    params = ", ".join(f"{k}={v}" for k, v in w.params.items())
    print(f"\n== {w.name}: {len(w.jobs):,} jobs on {c.nodes} x {c.gpus_per_node} GPUs, "
          f"{c.nodes_per_switch or c.nodes} node(s) per switch; {params}")
    print(table(rows))
    left = {r["unschedulable"] for r in rows}
    if left != {0}:
        print(f"  {max(left)} job(s) larger than the cluster left out")
    res = targets({r["policy"]: r for r in rows})
    for key, what in TARGETS:
        if key in res:
            ok, detail = res[key]
            print(f"  {'PASS' if ok else 'MISS'}  {what}: {detail}")
    sys.stdout.flush()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default=",".join(NAMES), help=f"comma-separated, of: {', '.join(NAMES)}")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="replays run in parallel")
    ap.add_argument("--quick", action="store_true", help="cut-down workloads (a smoke test, seconds)")
    ap.add_argument("--json", metavar="OUT", help="write every replay's figures and the targets there")
    args = ap.parse_args(argv)
    names = [n for n in args.workloads.split(",") if n]
    policies = [p for p in args.policies.split(",") if p]
    t0 = time.perf_counter()
    unknown = [p for p in policies if p not in REGISTERED]
    if unknown:
        ap.error(f"unknown policy {', '.join(unknown)}; known: {', '.join(REGISTERED)}")
    try:
        loads = suite(names, args.quick)
    except ValueError as exc:
        ap.error(str(exc))
    print(f"scheduler: {native.status()}; {len(loads)} workload(s) ({'quick' if args.quick else 'whole'}) "
          f"loaded in {time.perf_counter() - t0:.1f} s; policies: {', '.join(policies)}; workers: {args.workers}")
    by_name = {w.name: w for w in loads}
    # the big replays first (better packing of the workers); each worker loads its workload again
    work = sorted(((w.name, p) for w in loads for p in policies),
                  key=lambda x: (-len(by_name[x[0]].jobs) * (1 if x[1] == "fifo" else 4)))
    done: dict[str, dict[str, dict[str, Any]]] = {}
    verdicts: dict[str, dict[str, tuple[bool, str]]] = {}
    out: dict[str, Any] = {"native": native.status(), "quick": args.quick, "policies": policies, "workloads": {}}
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures: dict[Future[dict[str, Any]], tuple[str, str]] = {
            pool.submit(run_one, n, args.quick, p): (n, p) for n, p in work}
        for fut in as_completed(futures):
            r = fut.result()
            n = r["workload"]
            done.setdefault(n, {})[r["policy"]] = r
            print(f"  .. {n}: {r['policy']} done ({r['wall_s']:.1f} s, {r['jobs_per_s']:,.0f} jobs/s)",
                  file=sys.stderr, flush=True)
            if len(done[n]) == len(policies):
                w = by_name[n]
                verdicts[n] = report(w, [done[n][p] for p in policies])
                out["workloads"][n] = {"cluster": [w.cluster.nodes, w.cluster.gpus_per_node,
                                                   w.cluster.nodes_per_switch],
                                       "params": w.params, "replays": done[n],
                                       "targets": {k: {"pass": ok, "detail": d} for k, (ok, d) in verdicts[n].items()}}
                if args.json:
                    with open(args.json, "w") as fh:
                        json.dump(out, fh, indent=1, default=str)
    print("\n== summary: tacc's targets over the workloads")
    for key, what in TARGETS:
        seen = [(n, v[key]) for n, v in verdicts.items() if key in v]
        if not seen:
            continue
        misses = [f"{n} {d}" for n, (ok, d) in seen if not ok]
        print(f"  {sum(ok for _, (ok, _) in seen)}/{len(seen)} PASS  {what}"
              + (f"; MISS on {'; '.join(misses)}" if misses else ""))
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
