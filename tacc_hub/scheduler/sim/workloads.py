"""The scheduler suite's workloads as data: name, jobs, cluster, and the parameters printed with them.

``suite()`` gives, by name (``NAMES``, in this order):
- ``philly-<vc>``: each Philly virtual cluster of ``PHILLY_VCS`` with at least ``MIN_VC_JOBS`` jobs,
  alone on 8-GPU nodes, as many as bring its mean GPU demand (sum of GPUs x duration over the span
  of its submissions) closest to ``LOAD`` (90%) of capacity (``size_cluster``); 2 nodes per switch
  up to 8 nodes, 3 up to 16, 4 above. Jobs larger than that cluster are left out by the simulator
  (counted in ``Result.unschedulable``).
- ``philly-all``: the whole trace on 64 x 8 GPUs, 4 nodes per switch (as bench_scheduler_replay.py).
- ``synth-*``: ``synth.generate`` with the ``SYNTH`` parameters, on the cluster they were drawn for;
  ``*-limits`` ones carry user time limits 2-10x the true durations.

``quick=True`` cuts every workload down for a smoke test: the first ``QUICK_JOBS`` jobs of a Philly VC
(4x that of the whole trace), on a cluster sized for them; synthetic ones with ``QUICK_JOBS`` jobs on 4
nodes.

``replay(workload, policy)`` runs one: when the jobs carry time limits, the policy is wrapped in
``UserLimits``, which shows each task's limit in ``TaskView.time_limit`` (and caps ``predicted`` by it,
as the live service's prediction is capped: ``scheduler.durations``); the simulator itself does not
read limits from jobs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..policies import make
from ..policy import Policy, TaskView, View
from .bundled import PHILLY_TRACE, PLACEMENTS
from .simulator import ClusterSpec, Result, simulate
from .slowdown import SlowdownTable, derive
from .synth import LimitedJob, SynthParams, generate
from .trace import Job, load_philly

LOAD = 0.9
GPUS_PER_NODE = 8
MIN_VC_JOBS = 300
QUICK_JOBS = 300
PHILLY_VCS = ("6214e9", "11cb48", "103959", "ee9e8c", "0e4a51", "ed69ec", "7f04ca", "2869ce", "e13805")
WHOLE = ClusterSpec(64, 8, 4)

SYNTH: dict[str, SynthParams] = {
    "synth-campus": SynthParams(seed=11),
    "synth-multinode": SynthParams(multi_node=0.4, seed=12),
    "synth-bursty": SynthParams(burstiness=4.0, seed=13),
    "synth-heavytail": SynthParams(tail=2.5, seed=14),
    "synth-tenants": SynthParams(tenants=40, multi_node=0.15, seed=15),
    "synth-limits": SynthParams(limit_factor=(2.0, 10.0), seed=16),
    "synth-multinode-limits": SynthParams(multi_node=0.4, burstiness=2.0, limit_factor=(2.0, 10.0), seed=17),
}

NAMES: tuple[str, ...] = (*(f"philly-{vc}" for vc in PHILLY_VCS), "philly-all", *SYNTH)


@dataclass(frozen=True)
class Workload:
    name: str
    jobs: list[Job]
    cluster: ClusterSpec
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def limits(self) -> dict[int, float]:
        """The user time limits the jobs carry, by job id (empty: none)."""
        return {j.id: j.time_limit for j in self.jobs if isinstance(j, LimitedJob) and j.time_limit is not None}


def mean_demand(jobs: Sequence[Job]) -> float:
    """GPUs the jobs ask for on average: sum of GPUs x duration over the span of their submissions."""
    if not jobs:
        return 0.0
    span = max(j.submit for j in jobs) - min(j.submit for j in jobs)
    work = sum(j.gpus * j.duration for j in jobs)
    return work / span if span > 0 else math.inf


def switch_size(nodes: int) -> int:
    return 2 if nodes <= 8 else 3 if nodes <= 16 else 4


def size_cluster(jobs: Sequence[Job], load: float = LOAD) -> ClusterSpec:
    """8-GPU nodes, as many as bring the jobs' mean GPU demand closest to ``load`` of capacity (>= 1)."""
    demand = mean_demand(jobs)
    want = demand / (load * GPUS_PER_NODE)
    lo = max(1, math.floor(want))
    nodes = min((lo, lo + 1), key=lambda n: abs(demand / (n * GPUS_PER_NODE) - load))
    return ClusterSpec(nodes, GPUS_PER_NODE, switch_size(nodes))


def _philly(name: str, trace: Path, quick: bool) -> Workload:
    limit = QUICK_JOBS if quick else None
    if name == "philly-all":
        jobs = load_philly(trace, limit=limit * 4 if limit else None).jobs
        cluster = size_cluster(jobs) if quick else WHOLE
        return Workload(name, jobs, cluster, {"source": "Philly, every VC", "jobs": len(jobs),
                                              "demand/capacity": round(mean_demand(jobs) / cluster.gpus, 3)})
    vc = name.removeprefix("philly-")
    jobs = load_philly(trace, tenant=vc, limit=limit).jobs
    cluster = size_cluster(jobs)
    return Workload(name, jobs, cluster, {"source": f"Philly VC {vc}", "jobs": len(jobs),
                                          "demand/capacity": round(mean_demand(jobs) / cluster.gpus, 3)})


def _synth(name: str, quick: bool) -> Workload:
    p = SYNTH[name]
    if quick:
        p = replace(p, jobs=QUICK_JOBS, nodes=4, nodes_per_switch=2)
    jobs: list[Job] = list(generate(p))
    params: dict[str, Any] = {k: v for k, v in p.as_dict().items() if k not in ("nodes", "nodes_per_switch")}
    params["demand/capacity"] = round(mean_demand(jobs) / (p.nodes * GPUS_PER_NODE), 3)
    return Workload(name, jobs, ClusterSpec(p.nodes, GPUS_PER_NODE, p.nodes_per_switch), params)


def workload(name: str, quick: bool = False, trace: Path = PHILLY_TRACE) -> Workload:
    if name in SYNTH:
        return _synth(name, quick)
    if name == "philly-all" or name.removeprefix("philly-") in PHILLY_VCS:
        return _philly(name, trace, quick)
    raise ValueError(f"unknown workload {name!r}; known: {', '.join(NAMES)}")


def suite(names: Iterable[str] | None = None, quick: bool = False, trace: Path = PHILLY_TRACE) -> list[Workload]:
    """The workloads named (all of ``NAMES`` by default); Philly VCs with fewer than ``MIN_VC_JOBS`` jobs
    are dropped when not cut down."""
    out = []
    for name in names or NAMES:
        w = workload(name, quick, trace)
        if name.startswith("philly-") and name != "philly-all" and not quick and len(w.jobs) < MIN_VC_JOBS:
            continue
        out.append(w)
    return out


class UserLimits:
    """``policy`` seeing user time limits: each task's view carries its job's limit in ``time_limit`` and
    ``predicted`` capped by it. Views are copied when the simulator replaces them (cached by identity),
    in the simulator's order, so the policy's O(changes) sync sees the same changes."""

    def __init__(self, policy: Policy, limits: Mapping[int, float]) -> None:
        self.policy = policy
        self.limits = limits
        self._cache: dict[int, tuple[TaskView, TaskView]] = {}

    def __getattr__(self, name: str) -> Any:  # name, preemptive, oracle, quota_aware, ...
        return getattr(self.policy, name)

    def _view(self, v: TaskView) -> TaskView:
        hit = self._cache.get(v.id)
        if hit is not None and hit[0] is v:
            return hit[1]
        limit = self.limits.get(v.id)
        out = v if limit is None else replace(v, time_limit=limit, predicted=min(v.predicted, limit))
        self._cache[v.id] = (v, out)
        return out

    def _patch(self, view: View) -> View:
        f = self._view
        return View(view.now, {k: f(v) for k, v in view.waiting.items()},
                    {k: f(v) for k, v in view.running.items()}, view.nodes, view.quotas, view.history, view.changes)

    def schedule(self, view: View) -> list[Any]:
        return self.policy.schedule(self._patch(view))

    def explain(self, view: View) -> Any:
        return self.policy.explain(self._patch(view))  # type: ignore[attr-defined]


_SLOWDOWN: list[SlowdownTable] = []


def slowdown() -> SlowdownTable:
    """The spread slowdowns every replay uses (derived once per process from the bundled measurements)."""
    if not _SLOWDOWN:
        _SLOWDOWN.append(derive(PLACEMENTS))
    return _SLOWDOWN[0]


def replay(w: Workload, policy: str, **kwargs: Any) -> Result:
    """``w`` under the policy named ``policy`` (``policies.POLICIES``), built with ``kwargs`` (none: its
    defaults), with the suite's spread slowdowns."""
    p: Any = make(policy, **kwargs)
    limits = w.limits
    if limits:
        p = UserLimits(p, limits)
    return simulate(w.jobs, w.cluster, p, slowdown())
