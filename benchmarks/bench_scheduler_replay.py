"""Philly trace replay: every policy on (a) the whole trace, 64 nodes x 8 GPUs, 4 nodes per switch,
and (b) virtual cluster 6214e9 alone on 6 nodes x 8 GPUs.

Prints a policy x metric table per replay (JCT, queueing delay, makespan, utilization,
per-tenant median slowdown, preemptions, spread starts, replay speed), the ratios of the
best non-oracle policy (by average JCT) to slurm, tiresias and the oracle, and our policy
``tacc``'s targets with PASS/MISS: average JCT <= 0.5x slurm's and <= 0.85x tiresias's, p99
JCT no worse than tiresias's, average JCT <= 1.5x the oracle's, no tenant's median slowdown
worse than under fifo, replay speed >= 5,000 jobs/s (the 82k-job trace in under 20 s).
Every replay is whole (nothing is cut); replays run in parallel, one per core
(``--workers``), so the total is about the slowest policies' sum divided by the cores.

Usage: python benchmarks/bench_scheduler_replay.py [--policies fifo,slurm,...] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from tacc_hub.scheduler import native
from tacc_hub.scheduler.policies import POLICIES, make
from tacc_hub.scheduler.sim import ClusterSpec, derive, load_philly, simulate
from tacc_hub.scheduler.sim.bundled import PHILLY_TRACE, PLACEMENTS
from tacc_hub.scheduler.sim.report import table

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


def targets(results):
    """tacc's targets against the baselines of the same replay, PASS/MISS each."""
    by = {r.policy: r for r in results}
    t = by.get("tacc")
    if t is None:
        return
    m = t.metrics

    def line(ok, what):
        print(f"  {'PASS' if ok else 'MISS'}  {what}")

    print("tacc targets:")
    if "slurm" in by:
        x = m.avg_jct / by["slurm"].metrics.avg_jct
        line(x <= 0.5, f"avg JCT <= 0.5x slurm: x{x:.2f}")
    if "tiresias" in by:
        x = m.avg_jct / by["tiresias"].metrics.avg_jct
        line(x <= 0.85, f"avg JCT <= 0.85x tiresias: x{x:.2f}")
        x = m.p99_jct / by["tiresias"].metrics.p99_jct
        line(x <= 1.0, f"p99 JCT <= tiresias: x{x:.2f}")
    if "srpt-oracle" in by:
        x = m.avg_jct / by["srpt-oracle"].metrics.avg_jct
        line(x <= 1.5, f"avg JCT <= 1.5x srpt-oracle: x{x:.2f}")
    if "fifo" in by:
        fifo = by["fifo"].metrics.tenant_slowdown
        worse = {k: (v, fifo[k]) for k, v in m.tenant_slowdown.items() if k in fifo and v > fifo[k]}
        line(not worse, "no tenant's median slowdown worse than under fifo"
             + (": " + ", ".join(f"{k} {a:.2f} > {b:.2f}" for k, (a, b) in worse.items()) if worse else ""))
    line(t.jobs_per_s >= TARGET_JOBS_PER_S, f"replay speed >= {TARGET_JOBS_PER_S:,.0f} jobs/s: {t.jobs_per_s:,.0f}")


def _run(args):
    title, cluster, name, trace_path, tenant, slowdown = args
    jobs = load_philly(trace_path, tenant=tenant).jobs
    return title, simulate(jobs, cluster, make(name), slowdown)


def report(title, cluster, n_jobs, results):
    print(f"\n== {title}: {n_jobs:,} jobs on {cluster.nodes} x {cluster.gpus_per_node} GPUs"
          f"{f', {cluster.nodes_per_switch} nodes per switch' if cluster.nodes_per_switch else ''}")
    print(table(results))
    for r in results:
        if r.unschedulable:
            print(f"  {r.policy}: {r.unschedulable} job(s) larger than the cluster left out")
        speed = "target met" if r.jobs_per_s >= TARGET_JOBS_PER_S else "TARGET MISSED"
        print(f"  {r.policy}: replayed {len(r.records):,} jobs in {r.wall_s:.1f} s = {r.jobs_per_s:,.0f} jobs/s "
              f"({speed}: >= {TARGET_JOBS_PER_S:,.0f}); {r.calls:,} policy calls")
    ratios(results)
    targets(results)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--trace", default=str(PHILLY_TRACE))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="replays run in parallel")
    args = ap.parse_args()
    names = [n for n in args.policies.split(",") if n]
    t = time.perf_counter()
    trace = load_philly(args.trace)
    print(f"trace: {len(trace.jobs):,} jobs loaded in {time.perf_counter() - t:.2f} s; scheduler: {native.status()}")
    slowdown = derive(PLACEMENTS)
    print("spread slowdown (GPUs, nodes) -> x: " + ", ".join(
        f"({g},{n}) {v:.2f}" for (g, n), v in sorted(slowdown.ratios.items()) if n > 1 and g in (2, 4, 8, 16)))
    t0 = time.perf_counter()
    replays = [("(a) whole Philly trace", ClusterSpec(64, 8, 4), None),
               ("(b) virtual cluster 6214e9 alone", ClusterSpec(6, 8, 0), "6214e9")]
    work = [(title, cluster, name, args.trace, tenant, slowdown)
            for title, cluster, tenant in replays for name in names]
    work.sort(key=lambda w: w[2] == "fifo")  # slow ones first: better packing of the workers
    done = {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:  # replays are independent: one per core
        for title, r in pool.map(_run, work):
            done.setdefault(title, {})[r.policy] = r
            print(f"  .. {title}: {r.policy} done ({r.wall_s:.0f} s)", file=sys.stderr, flush=True)
    for title, cluster, tenant in replays:
        n_jobs = len(trace.jobs) if tenant is None else len(load_philly(args.trace, tenant=tenant).jobs)
        report(title, cluster, n_jobs, [done[title][n] for n in names])
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
