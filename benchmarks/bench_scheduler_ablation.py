"""The tacc ablation (issue 22): tacc with its defaults and with each mechanism switched off, over the suite.

Every workload of ``sim.workloads`` (as ``bench_scheduler_suite.py``) is replayed under ``tacc`` with its
defaults, under each variant of ``VARIANTS`` (one mechanism off, the rest at their defaults), and once under
``tiresias``, ``srpt-oracle`` and ``fifo`` (the baselines of the targets). Per workload and variant it prints
avg / p99 JCT, their ratios to tacc-default and to tiresias, the avg ratio to the oracle and the issue's four
targets (avg <= 0.85x tiresias, p99 <= 1.0x tiresias, no tenant's median slowdown worse than under fifo, avg
<= 2x the oracle); then per variant how many workloads pass each target and the geometric mean over the
workloads of its avg JCT / tacc-default's (> 1: switching the mechanism off costs; it earns its place) and the
wall seconds of its replays (noisy on a shared machine; the bounds on a pass's work earn theirs there).

Usage: python benchmarks/bench_scheduler_ablation.py [--workloads a,b] [--variants v,w] [--workers N]
       [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any

from bench_scheduler_suite import TARGETS, run_one, targets

from tacc_hub.scheduler import native
from tacc_hub.scheduler.sim.workloads import NAMES, suite

BASELINES = ("tiresias", "srpt-oracle", "fifo")
# name -> (what is switched off, tacc's constructor arguments); "default" first
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "default": ("nothing: tacc's defaults", {}),
    "no-probes": ("batches' probes (probes=0)", {"probes": 0}),
    "no-contexts": ("learned contexts and batches (context_width=0)", {"context_width": 0, "probes": 0}),
    "no-aging": ("aging steps (age_step=0: never)", {"age_step": 0.0}),
    "ratio-2": ("level ratio 2 instead of the default", {"level_ratio": 2.0}),
    "ratio-8": ("level ratio 8 instead of the default", {"level_ratio": 8.0}),
    "no-min-run": ("min_run (0)", {"min_run": 0.0}),
    "no-preempt-bounds": ("preemption bounds (max_preempt_test, max_victims unbounded)",
                          {"max_preempt_test": 1 << 30, "max_victims": 1 << 30}),
    "always-spread": ("spread-vs-wait (spread_wait=False: spread whenever only spread fits)",
                      {"spread_wait": False}),
    "no-take-back": ("take-back (take_back=False: a task started below the waiting head keeps its min_run)",
                     {"take_back": False}),
    "no-fair-share": ("fair share (fair_weight=0)", {"fair_weight": 0.0}),
    "no-size": ("per-GPU index (size_exponent=0)", {"size_exponent": 0.0}),
}


def _geo(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def report(name: str, base: dict[str, dict[str, Any]], rows: dict[str, dict[str, Any]],
           variants: list[str]) -> dict[str, dict[str, Any]]:
    """Print one workload's table; return per variant its targets and its avg JCT / default's."""
    tir, orc = base.get("tiresias"), base.get("srpt-oracle")
    ref = rows.get("default")
    print(f"\n== {name} (baselines, h: " + ", ".join(
        f"{p} avg {base[p]['avg_jct'] / 3600:.2f} p99 {base[p]['p99_jct'] / 3600:.1f}" for p in BASELINES if p in base)
        + ")")
    print(f"  {'variant':<18} {'avg h':>8} {'p99 h':>8} {'avg/dflt':>8} {'p99/dflt':>8} {'avg/tir':>8} "
          f"{'p99/tir':>8} {'avg/orc':>8} {'preempt':>8}  targets")
    out: dict[str, dict[str, Any]] = {}
    for v in variants:
        r = rows[v]
        res = targets({**base, "tacc": r})
        rel = r["avg_jct"] / ref["avg_jct"] if ref else math.nan
        rel99 = r["p99_jct"] / ref["p99_jct"] if ref else math.nan
        at = r["avg_jct"] / tir["avg_jct"] if tir else math.nan
        pt = r["p99_jct"] / tir["p99_jct"] if tir else math.nan
        ao = r["avg_jct"] / orc["avg_jct"] if orc else math.nan
        marks = "".join("P" if res[k][0] else "." for k, _ in TARGETS if k in res)
        print(f"  {v:<18} {r['avg_jct'] / 3600:>8.2f} {r['p99_jct'] / 3600:>8.1f} {rel:>8.3f} {rel99:>8.3f} "
              f"{at:>8.2f} {pt:>8.2f} {ao:>8.2f} {r['preemptions']:>8}  {marks}")
        out[v] = {"targets": {k: ok for k, (ok, _) in res.items()}, "avg_vs_default": rel, "p99_vs_default": rel99,
                  "avg_vs_tiresias": at, "p99_vs_tiresias": pt, "avg_vs_oracle": ao,
                  "avg_jct": r["avg_jct"], "p99_jct": r["p99_jct"], "median_jct": r["median_jct"],
                  "preemptions": r["preemptions"], "wall_s": r["wall_s"]}
    sys.stdout.flush()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default=",".join(NAMES), help=f"comma-separated, of: {', '.join(NAMES)}")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of: {', '.join(VARIANTS)}")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="replays run in parallel")
    ap.add_argument("--quick", action="store_true", help="cut-down workloads (a smoke test, seconds)")
    ap.add_argument("--json", metavar="OUT", help="write every variant's figures and targets there")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    t0 = time.perf_counter()
    try:
        loads = suite([n for n in args.workloads.split(",") if n], args.quick)
    except ValueError as exc:
        ap.error(str(exc))
    print(f"scheduler: {native.status()}; {len(loads)} workload(s) ({'quick' if args.quick else 'whole'}); "
          f"variants: {', '.join(variants)}; workers: {args.workers}")
    for v in variants:
        print(f"  {v}: {VARIANTS[v][0]} {VARIANTS[v][1] or ''}")
    print("  targets (P pass, . miss): " + "; ".join(what for _, what in TARGETS))
    size = {w.name: len(w.jobs) for w in loads}
    work = [(w.name, p, None) for w in loads for p in BASELINES] + [(w.name, "tacc", v) for w in loads
                                                                    for v in variants]
    work.sort(key=lambda x: -size[x[0]] * (1 if x[1] == "fifo" else 4))  # the big replays first
    base: dict[str, dict[str, dict[str, Any]]] = {}
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    result: dict[str, Any] = {"native": native.status(), "quick": args.quick, "variants":
                              {v: {"off": VARIANTS[v][0], "kwargs": str(VARIANTS[v][1])} for v in variants},
                              "workloads": {}}
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures: dict[Future[dict[str, Any]], tuple[str, str, str | None]] = {
            pool.submit(run_one, n, args.quick, p, **(VARIANTS[v][1] if v else {})): (n, p, v) for n, p, v in work}
        for fut in as_completed(futures):
            n, p, v = futures[fut]
            r = fut.result()
            if v is None:
                base.setdefault(n, {})[p] = r
            else:
                rows.setdefault(n, {})[v] = r
            print(f"  .. {n}: {v or p} ({r['wall_s']:.1f} s)", file=sys.stderr, flush=True)
            if len(base.get(n, {})) == len(BASELINES) and len(rows.get(n, {})) == len(variants):
                result["workloads"][n] = report(n, base[n], rows[n], variants)
                if args.json:
                    with open(args.json, "w") as fh:
                        json.dump(result, fh, indent=1, default=str)
    done = [n for n in (w.name for w in loads) if n in result["workloads"]]
    print(f"\n== summary over {len(done)} workload(s): per variant, workloads passing each target; geometric "
          "mean of avg JCT / default's (and of p99 / default's)")
    print(f"  {'variant':<18} " + " ".join(f"{k:>16}" for k, _ in TARGETS) + f" {'geo avg/dflt':>13} "
          f"{'geo p99/dflt':>13} {'replay s':>9}")
    for v in variants:
        per = [result["workloads"][n][v] for n in done]
        counts = [f"{sum(x['targets'].get(k, False) for x in per)}/{len(per)}" for k, _ in TARGETS]
        print(f"  {v:<18} " + " ".join(f"{c:>16}" for c in counts)
              + f" {_geo([x['avg_vs_default'] for x in per]):>13.3f}"
              + f" {_geo([x['p99_vs_default'] for x in per]):>13.3f}"
              + f" {sum(x['wall_s'] for x in per):>9.0f}")
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
