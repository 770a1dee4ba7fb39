"""What ``tacc``'s ``explain`` costs per waiting task (CPU time), optionally against an older version of it.

Replays the first ``--limit`` jobs of a suite workload (``sim.workloads``) under ``tacc``; at every
``--every``-th pass it syncs the policy with the pass's view and times ``tacc_explain.explain`` on it
(the second of two calls: warm), and, with ``--against COMMIT``, the ``tacc_explain.py`` of that commit
(``git show``, loaded as a module of the same package) on the same view. Prints the views timed, the
waiting tasks explained (and the largest queue), and the CPU time per task and per view.

Usage: nice -n 10 python benchmarks/bench_explain_cost.py philly-6214e9 [--limit 12000] [--every 20]
       [--against fe51359]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from tacc_hub.scheduler import native
from tacc_hub.scheduler.policies import make, tacc_explain
from tacc_hub.scheduler.policy import Explanation, Policy, View
from tacc_hub.scheduler.sim import simulate, workloads
from tacc_hub.scheduler.sim.estimates import StartEstimates

Explain = Callable[[Any, View], dict[int, Explanation]]


def at_commit(commit: str) -> ModuleType:
    """``tacc_explain`` as it was at ``commit``, a module of ``tacc_hub.scheduler.policies`` (nothing written)."""
    root = Path(__file__).resolve().parents[1]
    src = subprocess.run(["git", "show", f"{commit}:tacc_hub/scheduler/policies/tacc_explain.py"], cwd=root,
                         check=True, capture_output=True, text=True).stdout
    mod = ModuleType(f"tacc_hub.scheduler.policies._tacc_explain_{commit}")
    mod.__package__ = "tacc_hub.scheduler.policies"
    sys.modules[mod.__name__] = mod
    exec(compile(src, f"{commit}:tacc_explain.py", "exec"), mod.__dict__)
    return mod


class Timed(StartEstimates):
    """Times the explains at every ``every``-th pass; asks nothing (``asked`` stays empty)."""

    def __init__(self, fns: Mapping[str, Explain], every: int) -> None:
        super().__init__()
        self.fns, self.every = fns, every
        self.cpu = dict.fromkeys(fns, 0.0)
        self.passes = self.views = self.tasks = self.most = 0

    def at_pass(self, view: View, policy: Policy, state: Any) -> None:
        self.passes += 1
        if self.passes % self.every or not view.waiting:
            return
        policy._prepare(view)  # type: ignore[attr-defined]  # what Tacc.explain does before the projection
        for name, fn in self.fns.items():
            fn(policy, view)
            t0 = time.process_time()
            fn(policy, view)
            self.cpu[name] += time.process_time() - t0
        self.views += 1
        self.tasks += len(view.waiting)
        self.most = max(self.most, len(view.waiting))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--limit", type=int, default=12000)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--against", default=None, help="a commit whose tacc_explain.py to time as well")
    args = ap.parse_args()
    w = workloads.workload(args.workload)
    fns: dict[str, Explain] = {"now": tacc_explain.explain}
    if args.against:
        fns[args.against] = at_commit(args.against).explain
    probe = Timed(fns, args.every)
    simulate(w.jobs[:args.limit], w.cluster, make("tacc"), workloads.slowdown(), estimates=probe)
    print(f"scheduler: {native.status()}")
    print(f"{args.workload}, first {args.limit:,} jobs: {probe.views:,} views, {probe.tasks:,} waiting tasks explained "
          f"(largest queue {probe.most:,})")
    for name, cpu in probe.cpu.items():
        print(f"  {name:>10}: {1e6 * cpu / max(probe.tasks, 1):6.1f} us CPU per task, "
              f"{1e3 * cpu / max(probe.views, 1):6.2f} ms per view")


if __name__ == "__main__":
    main()
