"""Philly trace replay: every policy on (a) the whole trace, 64 nodes x 8 GPUs, 4 nodes per switch,
and (b) virtual cluster 6214e9 alone on 6 nodes x 8 GPUs.

Prints a policy x metric table per replay (JCT, queueing delay, makespan, utilization,
per-tenant median slowdown, preemptions, spread starts, replay speed) and the ratios of the
best non-oracle policy (by average JCT) to slurm, tiresias and the oracle. Target: replay
speed >= 5,000 jobs/s (the 82k-job trace in under 20 s); a policy that misses it is named,
with its speed, never cut silently. ``--budget S``: a policy whose replay of (a) would take
longer (estimated from a 10,000-job prefix) is run on that prefix only, and the table says so.

Usage: python benchmarks/bench_scheduler_replay.py [--policies fifo,slurm,...] [--budget 240]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tacc_hub.scheduler.policies import POLICIES, make
from tacc_hub.scheduler.sim import ClusterSpec, derive, load_philly, simulate
from tacc_hub.scheduler.sim.report import table

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
TARGET_JOBS_PER_S = 5000.0


def ratios(results):
    by = {r.policy: r for r in results}
    contenders = [r for r in results if r.policy != "srpt-oracle"]
    if not contenders:
        return
    best = min(contenders, key=lambda r: r.metrics.avg_jct)
    parts = []
    for ref in ("slurm", "tiresias", "srpt-oracle"):
        if ref in by and ref != best.policy and by[ref].metrics.avg_jct > 0:
            o = by[ref].metrics
            b = best.metrics
            parts.append(f"vs {ref}: avg JCT x{b.avg_jct / o.avg_jct:.2f}, "
                         f"p99 JCT x{b.p99_jct / max(o.p99_jct, 1):.2f}, "
                         f"avg queue x{b.avg_queue / max(o.avg_queue, 1):.2f}")
    print(f"best non-oracle policy by average JCT: {best.policy}" + ("; " + "; ".join(parts) if parts else ""))


def replay(title, jobs, cluster, names, slowdown, budget):
    print(f"\n== {title}: {len(jobs):,} jobs on {cluster.nodes} x {cluster.gpus_per_node} GPUs"
          f"{f', {cluster.nodes_per_switch} nodes per switch' if cluster.nodes_per_switch else ''}")
    results, notes = [], []
    for name in names:
        run_jobs = jobs
        if budget and len(jobs) > 20000:
            probe = simulate(jobs[:10000], cluster, make(name), slowdown)
            estimate = probe.wall_s * len(jobs) / 10000
            if estimate > budget:
                run_jobs = jobs[:10000]
                notes.append(f"{name}: full replay estimated at {estimate:,.0f} s (> budget {budget:,.0f} s): "
                             f"row is the first 10,000 jobs only")
        r = simulate(run_jobs, cluster, make(name), slowdown)
        if r.unschedulable:
            notes.append(f"{name}: {r.unschedulable} job(s) larger than the cluster left out")
        speed = "target met" if r.jobs_per_s >= TARGET_JOBS_PER_S else "TARGET MISSED"
        notes.append(f"{name}: replayed {len(r.records):,} jobs in {r.wall_s:.1f} s = {r.jobs_per_s:,.0f} jobs/s "
                     f"({speed}: >= {TARGET_JOBS_PER_S:,.0f}); {r.calls:,} policy calls")
        results.append(r)
        print(f"  .. {name} done ({r.wall_s:.0f} s)", file=sys.stderr, flush=True)
    print(table(results))
    for n in notes:
        print("  " + n)
    ratios(results)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--trace", default=str(TRACES / "philly.csv"))
    ap.add_argument("--budget", type=float, default=240.0, help="seconds per full-trace replay (0: no limit)")
    args = ap.parse_args()
    names = [n for n in args.policies.split(",") if n]
    t = time.perf_counter()
    trace = load_philly(args.trace)
    print(f"trace: {len(trace.jobs):,} jobs loaded in {time.perf_counter() - t:.2f} s")
    slowdown = derive(TRACES / "placements")
    print("spread slowdown (GPUs, nodes) -> x: " + ", ".join(
        f"({g},{n}) {v:.2f}" for (g, n), v in sorted(slowdown.ratios.items()) if n > 1 and g in (2, 4, 8, 16)))
    t0 = time.perf_counter()
    replay("(a) whole Philly trace", trace.jobs, ClusterSpec(64, 8, 4), names, slowdown, args.budget)
    vc = load_philly(args.trace, tenant="6214e9")
    replay("(b) virtual cluster 6214e9 alone", vc.jobs, ClusterSpec(6, 8, 0), names, slowdown, args.budget)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
