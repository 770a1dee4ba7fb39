"""Start estimates, measured (issue 22): how often the estimated start a waiting task is shown comes true.

For each workload, replays it under each policy twice: once plain, once recording start estimates
(``sim.estimates.StartEstimates``: at a job's arrival, and 1 h later if it still waits, the policy's
own ``explain()`` estimate and a Slurm-style one, ``squeue --start`` as the builtin scheduler gives it:
every running job to its time limit, the queue in submit order). Prints per workload and policy, for
the jobs whose actual wait from the moment asked was at least 10 min: how many, the share whose
estimated wait is within 2x of the actual one (ours, Slurm-style), the median relative error and the
median estimated/actual ratio, at submission and at +1 h; PASS/MISS against ">= 70% within 2x and
better than Slurm-style"; and the cost: the replay's time with and without recording, and whether the
two replays made the same decisions (same records: they must).

Workloads: Philly virtual cluster 6214e9 alone on 6 x 8 GPUs and the whole trace on 64 x 8 GPUs, 4 nodes
per switch (as ``bench_scheduler_replay.py``), or ``--suite``: the 17 of ``sim.workloads`` (bench_scheduler_suite.py's).
Philly jobs carry no time limit: the Slurm-style estimate uses ``estimates.written_limit`` (true duration
x 2-10, fixed per job); ``--exact-limits`` gives it each job's true duration instead (users who know their
run times: what is left is the order). ``--sample K`` asks only for jobs whose id is a multiple of K (each ask explains
the whole queue): the sample size is printed. Ours is what the service shows: the policy's projection
corrected by ``calibration.Calibration``; the raw column is the projection alone. ``--explain-at COMMIT``
replaces ours by ``tacc``'s projection of that commit, uncalibrated (the estimate before it changed).

Usage: nice -n 19 python benchmarks/bench_start_estimates.py [--policies tacc] [--limit N] [--sample K]
       [--workers 2] [--suite [--workloads a,b]] [--exact-limits] [--explain-at COMMIT]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tacc_hub.scheduler import native
from tacc_hub.scheduler.policies import make
from tacc_hub.scheduler.sim import ClusterSpec, Job, SlowdownTable, derive, load_philly, simulate
from tacc_hub.scheduler.sim.bundled import PHILLY_TRACE, PLACEMENTS
from tacc_hub.scheduler.sim.estimates import LATER, SUBMIT, Score, StartEstimates, score, written_limit

TARGET = 0.70  # share within 2x of the actual wait


@dataclass(frozen=True)
class Workload:
    name: str
    cluster: ClusterSpec
    jobs: Sequence[Job]
    limits: Mapping[int, float] = field(default_factory=dict)  # user time limits the policy sees (UserLimits)


def philly(limit: int | None) -> list[Workload]:
    """The two replays of ``bench_scheduler_replay.py`` (the first ``limit`` jobs of each, if given)."""
    return [Workload("philly 6214e9 6x8", ClusterSpec(6, 8, 0), load_philly(PHILLY_TRACE, "6214e9", limit).jobs),
            Workload("philly whole 64x8", ClusterSpec(64, 8, 4), load_philly(PHILLY_TRACE, None, limit).jobs)]


def suite(limit: int | None, names: Sequence[str] | None = None) -> list[Workload]:
    """The workloads of issue 22's suite (``sim.workloads``: bench_scheduler_suite.py's; those ``names`` if given),
    cut to ``limit`` jobs; the policy sees the jobs' time limits as in ``workloads.replay``."""
    from tacc_hub.scheduler.sim import workloads

    return [Workload(w.name, w.cluster, list(w.jobs)[:limit] if limit else list(w.jobs), w.limits)
            for w in workloads.suite(names)]


@dataclass(frozen=True)
class Outcome:
    workload: str
    policy: str
    jobs: int
    plain_s: float
    recorded_s: float
    same: bool
    asks: int
    asked_jobs: int
    explain_s: float
    slurm_s: float
    submit: Score
    later: Score


def _exact(job: Job) -> float:
    return job.duration


def _policy(name: str, w: Workload) -> Any:
    from tacc_hub.scheduler.sim.workloads import UserLimits

    return UserLimits(make(name), w.limits) if w.limits else make(name)


def _run(args: tuple[Workload, str, int, bool, SlowdownTable, str | None]) -> Outcome:
    w, name, sample, exact, slowdown, explain_at = args
    if explain_at:  # tacc's projection as it was at that commit, uncalibrated (Tacc.explain imports it per call)
        from bench_explain_cost import at_commit

        from tacc_hub.scheduler.policies import tacc_explain

        tacc_explain.explain = at_commit(explain_at).explain  # type: ignore[assignment]
    plain = simulate(w.jobs, w.cluster, _policy(name, w), slowdown)
    est = StartEstimates(sample=sample, limit=_exact if exact else written_limit)
    if explain_at:
        est.calibration = None
    rec = simulate(w.jobs, w.cluster, _policy(name, w), slowdown, estimates=est)
    return Outcome(w.name, name, len(rec.records), plain.wall_s, rec.wall_s, plain.records == rec.records, est.asks,
                   sum(a.kind == SUBMIT for a in est.asked), est.explain_s, est.slurm_s,
                   score(est.asked, rec.records, SUBMIT), score(est.asked, rec.records, LATER))


def _pct(x: float) -> str:
    return "   -" if math.isnan(x) else f"{100 * x:3.0f}%"


def _x(x: float) -> str:
    return "    -" if math.isnan(x) else ("  inf" if math.isinf(x) else f"{x:5.2f}")


def report(outs: list[Outcome]) -> None:
    print("\nwithin 2x: estimated wait / actual wait in [0.5, 2], among jobs that waited >= 10 min from the moment "
          "asked; err: median |estimated - actual| / actual; est/act: median estimated / actual wait; ours: what "
          "the service shows (calibrated), raw: the policy's projection before calibration")
    head = (f"{'workload':<22} {'policy':<8} {'when':<6} {'jobs':>6} {'ours 2x':>7} {'raw 2x':>6} {'slurm 2x':>8} "
            f"{'ours err':>8} {'slurm err':>9} {'ours est/act':>12} {'raw est/act':>11} {'slurm est/act':>13}  verdict")
    print(head)
    print("-" * len(head))
    for o in outs:
        for when, s in (("submit", o.submit), ("+1 h", o.later)):
            ok = s.measured > 0 and s.ours_2x >= TARGET and s.ours_2x > s.slurm_2x
            print(f"{o.workload:<22} {o.policy:<8} {when:<6} {s.measured:>6,} {_pct(s.ours_2x):>7} "
                  f"{_pct(s.raw_2x):>6} {_pct(s.slurm_2x):>8} {_x(s.ours_err):>8} {_x(s.slurm_err):>9} "
                  f"{_x(s.ours_ratio):>12} {_x(s.raw_ratio):>11} {_x(s.slurm_ratio):>13}  {'PASS' if ok else 'MISS'}")
    print("\ncost (PASS/MISS: >= 70% within 2x and more than the Slurm-style estimate)")
    for o in outs:
        print(f"  {o.workload} / {o.policy}: {o.jobs:,} jobs; replay {o.plain_s:.1f} s plain, {o.recorded_s:.1f} s "
              f"recording ({o.recorded_s / max(o.plain_s, 1e-9):.1f}x): {o.asks:,} asks for {o.asked_jobs:,} "
              f"sampled jobs, explain {o.explain_s:.1f} s, Slurm-style {o.slurm_s:.1f} s; "
              f"same decisions: {'yes' if o.same else 'NO'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", default="tacc", help="comma-separated (a policy without explain() gets the "
                    "service's generic one, in queue order)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N jobs of each workload")
    ap.add_argument("--sample", type=int, default=1, help="ask only for jobs whose id is a multiple of K")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--suite", action="store_true", help="the workloads of sim.workloads instead of the two Philly")
    ap.add_argument("--workloads", default="", help="with --suite: only these (comma-separated names)")
    ap.add_argument("--explain-at", default=None, help="ours: tacc_explain.py of this commit, uncalibrated "
                    "(the estimate before)")
    ap.add_argument("--exact-limits", action="store_true", help="Slurm-style limits: true durations, not 2-10x")
    args = ap.parse_args()
    print(f"scheduler: {native.status()}; sample: every {args.sample} job(s); "
          + (f"ours: tacc_explain.py at {args.explain_at}, uncalibrated; " if args.explain_at else "")
          + "Slurm-style limits: "
          + ("true durations" if args.exact_limits else "the trace's, else true duration x 2-10")
          + (f"; first {args.limit:,} jobs of each workload" if args.limit else ""))
    t0 = time.perf_counter()
    names_w = [n for n in args.workloads.split(",") if n] or None
    loads = suite(args.limit, names_w) if args.suite else philly(args.limit)
    slowdown = derive(PLACEMENTS)
    names = [n for n in args.policies.split(",") if n]
    work = [(w, n, args.sample, args.exact_limits, slowdown, args.explain_at) for w in loads for n in names]
    work.sort(key=lambda x: -len(x[0].jobs))  # the longest first: better packing of the workers
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = {}
        for o in pool.map(_run, work):
            done[(o.workload, o.policy)] = o
            print(f"  .. {o.workload} / {o.policy} done ({o.recorded_s:.0f} s)", file=sys.stderr, flush=True)
    report([done[(w.name, n)] for w in loads for n in names])
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
