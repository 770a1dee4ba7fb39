"""Event-driven replay of a job trace through a ``Policy``.

Events: arrivals (trace order), completions (a heap), and the wake-up a policy
asked for (one pending: a pass's ``Wake`` replaces an earlier pass's, as in the
service's controller). The end of a run that was preempted is no event. At
each event time the simulator applies every completion and arrival at that
time, then calls ``policy.schedule`` once (skipped when nothing waits, or when
no GPU is free and the policy never preempts: it could not act) and applies
the actions in order. Each view carries ``View.changes``: every task that
entered, left or changed in ``waiting``/``running`` since the previous view
(views number 1, 2, ... per replay), so a policy may sync in O(changes).

Invariants (a policy that breaks one stops the replay with ``PolicyError``):
no GPU allocated twice; a start places the whole task (gang) on the task's
shape; only waiting tasks start, only running preemptible ones are preempted;
with ``quotas``, no start takes a user or group above its ``max_gpus`` (GPUs
held, counted as actions apply in order) and no task of an ``exhausted`` user or
group starts. Quotas may be given only to a policy whose ``quota_aware`` flag
is set (``ValueError`` otherwise): a quota-unaware policy could not keep them.
Other guarantees:
- Policies see predictions (``Predictor``: the group's median of completed
  durations, blended with a default) and ``View.history`` (histograms of the
  durations of completed jobs); the true duration only if ``oracle``.
- A preempted job keeps its submit time and its progress (checkpointed), goes
  back to the queue, and pays ``restart_overhead`` seconds when it starts again.
- A placement over more nodes than the job's minimum (or over several
  switches) runs slower by ``SlowdownTable.factor``; the factor applies to
  the work remaining when it starts there.
- With ``estimates`` (``estimates.StartEstimates``, opt-in), each pass's view is first shown to it, and it
  asks the policy's ``explain`` for the start estimates of the jobs due one: the policy syncs with that view
  as ``schedule`` would, so the decisions are the same; without it, one ``None`` test per pass.
- Jobs that could never fit the cluster (more GPUs than it has) are left out
  and counted in ``Result.unschedulable``; the rest all finish, or the replay
  raises ``Stuck`` (jobs waiting, nothing running, nothing left to happen).
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from ..cluster import Placement
from ..frozen import Frozen
from ..policy import Changes, Policy, Preempt, Quotas, Start, TaskView, View, Wake
from ..topology import NodeView, min_nodes
from .errors import PolicyError, Stuck
from .estimates import StartEstimates
from .metrics import JobRecord, Metrics, summarize
from .predict import Predictor
from .slowdown import SlowdownTable
from .trace import Job


@dataclass(frozen=True, slots=True)
class ClusterSpec(Frozen):
    nodes: int
    gpus_per_node: int
    nodes_per_switch: int = 0  # 0: every node under one switch

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_views(self) -> list[NodeView]:
        per = self.nodes_per_switch or self.nodes
        return [NodeView(f"n{i:04d}", self.gpus_per_node, f"s{i // per:03d}", tuple(range(self.gpus_per_node)))
                for i in range(self.nodes)]

    def shape(self, gpus: int) -> tuple[int, int] | None:
        """(nodes, GPUs per node) of the packed shape for ``gpus`` GPUs, None if it cannot fit."""
        if gpus > self.gpus:
            return None
        n = min_nodes(gpus, self.gpus_per_node)
        while gpus % n:
            n += 1
        return (n, gpus // n) if gpus // n <= self.gpus_per_node and n <= self.nodes else None


@dataclass(slots=True)
class _Job:
    job: Job
    view: TaskView
    epoch: int = 0
    first_start: float = -1.0
    run_time: float = 0.0
    overhead: float = 0.0  # of the current run
    preemptions: int = 0

    def __init__(self, job: Job, view: TaskView, epoch: int = 0, first_start: float = -1.0, run_time: float = 0.0,
                 overhead: float = 0.0, preemptions: int = 0) -> None:
        # written out: native when compiled (see ``TaskView.__init__``)
        self.job, self.view, self.epoch, self.first_start = job, view, epoch, first_start
        self.run_time, self.overhead, self.preemptions = run_time, overhead, preemptions


@dataclass
class Result:
    policy: str
    metrics: Metrics
    records: list[JobRecord]
    unschedulable: int
    wall_s: float
    calls: int
    preemptions: int
    spread_starts: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def jobs_per_s(self) -> float:
        return len(self.records) / self.wall_s if self.wall_s > 0 else math.inf


class Simulator:
    def __init__(self, jobs: Sequence[Job], cluster: ClusterSpec, policy: Policy,
                 slowdown: SlowdownTable | None = None, predictor: Predictor | None = None,
                 restart_overhead: float = 30.0, quotas: Quotas | None = None,
                 estimates: StartEstimates | None = None) -> None:
        if quotas is not None and not getattr(policy, "quota_aware", False):
            raise ValueError(f"policy {policy.name!r} does not honour quotas; give it none")
        self.quotas = quotas
        self.held_user: dict[str, int] = {}
        self.held_group: dict[str, int] = {}
        self.cluster = cluster
        self.policy = policy
        self.slowdown = slowdown or SlowdownTable.unit()
        self.predictor = predictor or Predictor()
        self.restart_overhead = restart_overhead
        self.jobs = sorted(jobs, key=lambda j: (j.submit, j.id))
        self.nodes = cluster.node_views()
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self.free: list[set[int]] = [set(n.free) for n in self.nodes]
        self.free_total = cluster.gpus
        self.waiting: dict[int, TaskView] = {}
        self.running: dict[int, TaskView] = {}
        self.state: dict[int, _Job] = {}
        self.done_heap: list[tuple[float, int, int]] = []  # (finish, job id, epoch)
        self.wake_at: float | None = None  # the pending wake-up: the latest pass's (as the service keeps it)
        self.records: list[JobRecord] = []
        self.busy = 0.0  # GPU-seconds held
        self.calls = 0
        self.spread_starts = 0
        # ids that entered, left or changed in waiting / running since the last view given to the policy
        self.moved_w: set[int] = set()
        self.moved_r: set[int] = set()
        self.estimates = estimates  # opt-in: records start estimates at each pass, before the policy decides

    # -- the loop -------------------------------------------------------------------------------

    def run(self) -> Result:
        # The cyclic garbage collector is paused for the replay: what a replay makes is acyclic (reference
        # counting frees it; peak RSS of replay (b) 75 MB either way), and the collector's walks over the
        # live views cost ~7% of a whole replay (benchmarks/README.md). Restored as it was afterwards.
        paused = gc.isenabled()
        gc.disable()
        try:
            return self._run()
        finally:
            if paused:
                gc.enable()

    def _run(self) -> Result:
        t0 = time.perf_counter()
        fits = [j for j in self.jobs if self.cluster.shape(j.gpus) is not None]
        unschedulable = len(self.jobs) - len(fits)
        i, n, now = 0, len(fits), 0.0
        inf = math.inf
        while True:
            if self.wake_at is not None and self.wake_at <= now:
                self.wake_at = None
            t_arr = fits[i].submit if i < n else inf
            t_done = self.done_heap[0][0] if self.done_heap else inf
            t_wake = self.wake_at if self.wake_at is not None and self.waiting else inf
            now = min(t_arr, t_done, t_wake)
            if now == inf:
                if self.waiting:
                    raise Stuck(f"{len(self.waiting)} job(s) wait with nothing running: {sorted(self.waiting)[:10]}")
                break
            event = now == t_wake
            while self.done_heap and self.done_heap[0][0] <= now:
                _, jid, epoch = heapq.heappop(self.done_heap)
                st = self.state.get(jid)
                if st is not None and st.epoch == epoch:  # else stale: the run it ended was preempted
                    self._finish(jid, now)
                    event = True
            while i < n and fits[i].submit <= now:
                self._arrive(fits[i], now)
                i += 1
                event = True
            if event and self.waiting and (self.free_total > 0 or self.policy.preemptive):
                self.calls += 1
                changes = Changes(self.calls, self.calls - 1, self.moved_w, self.moved_r)
                self.moved_w, self.moved_r = set(), set()
                view = View(now, self.waiting, self.running, self.nodes, self.quotas, self.predictor.history, changes)
                if self.estimates is not None:
                    self.estimates.at_pass(view, self.policy, self.state)
                actions = self.policy.schedule(view)
                self._apply(actions, now)
        wall = time.perf_counter() - t0
        metrics = summarize(self.records, self.cluster.gpus, self.busy)
        return Result(self.policy.name, metrics, self.records, unschedulable, wall, self.calls,
                      metrics.preemptions, self.spread_starts)

    # -- events ---------------------------------------------------------------------------------

    def _arrive(self, job: Job, now: float) -> None:
        shape = self.cluster.shape(job.gpus)
        assert shape is not None
        view = TaskView(
            id=job.id, owner=job.tenant, group=job.tenant, submit=job.submit, nodes=shape[0],
            gpus_per_node=shape[1], predicted=self.predictor.predict(job.tenant),
            duration=job.duration if self.policy.oracle else None, flexible=True, queued=now,
        )
        self.state[job.id] = _Job(job, view)
        self.waiting[job.id] = view
        self.moved_w.add(job.id)

    def _finish(self, jid: int, now: float) -> None:
        st = self.state.pop(jid)
        view = self.running.pop(jid)
        self.moved_r.add(jid)
        assert view.start is not None and view.placement is not None
        held = now - view.start
        self.busy += view.gpus * held
        self._unhold(view)
        self.predictor.observe(st.job.tenant, st.job.duration)
        self.records.append(JobRecord(
            st.job.id, st.job.tenant, st.job.gpus, st.job.submit, st.job.duration, st.first_start, now,
            st.run_time + held, st.preemptions,
        ))

    # -- actions --------------------------------------------------------------------------------

    def _apply(self, actions: Sequence[object], now: float) -> None:
        preempted: set[int] = set()
        wake: float | None = None
        for action in actions:
            if isinstance(action, Start):
                if action.task_id in preempted:
                    raise PolicyError(f"task {action.task_id} started in the pass that preempted it")
                self._start(action.task_id, action.placement, now)
            elif isinstance(action, Preempt):
                self._preempt(action.task_id, now)
                preempted.add(action.task_id)
            elif isinstance(action, Wake):
                if action.at > now:
                    wake = action.at if wake is None else min(wake, action.at)
            else:
                raise PolicyError(f"unknown action {action!r}")
        if wake is not None:
            self.wake_at = wake  # replaces the one an earlier pass asked for, as in the service

    def _start(self, jid: int, placement: Placement, now: float) -> None:
        view = self.waiting.get(jid)
        if view is None:
            raise PolicyError(f"start of task {jid}, which is not waiting")
        nodes = placement.nodes
        if len({s.node for s in nodes}) != len(nodes):
            raise PolicyError(f"task {jid}: a node appears twice in {placement}")
        if view.flexible:
            if placement.gpu_count != view.gpus or any(not s.gpus for s in nodes):
                raise PolicyError(f"task {jid}: needs {view.gpus} GPU(s), placement has {placement.gpu_count}")
        elif len(nodes) != view.nodes or any(len(s.gpus) != view.gpus_per_node for s in nodes):
            raise PolicyError(f"task {jid}: needs {view.nodes} x {view.gpus_per_node} GPU(s), got {placement}")
        for s in nodes:
            k = self.index.get(s.node)
            if k is None:
                raise PolicyError(f"task {jid}: unknown node {s.node!r}")
            if len(set(s.gpus)) != len(s.gpus) or not set(s.gpus) <= self.free[k]:
                raise PolicyError(f"task {jid}: GPU(s) {s.gpus} on {s.node} are not free")
        if self.quotas is not None:
            self._check_quota(view)
        switches = set()
        for s in nodes:
            k = self.index[s.node]
            self.free[k].difference_update(s.gpus)
            self._refresh(k)
            switches.add(self.nodes[k].switch)
        self.free_total -= view.gpus
        self.held_user[view.owner] = self.held_user.get(view.owner, 0) + view.gpus
        self.held_group[view.group] = self.held_group.get(view.group, 0) + view.gpus
        least = min_nodes(view.gpus, self.cluster.gpus_per_node)
        factor = self.slowdown.factor(view.gpus, len(nodes), least, len(switches))
        if len(nodes) > least or len(switches) > 1:
            self.spread_starts += 1
        st = self.state[jid]
        st.overhead = self.restart_overhead if st.preemptions else 0.0
        if st.first_start < 0:
            st.first_start = now
        del self.waiting[jid]
        running = _copy(view, view.queued, view.done, view.attained, now, placement, 1.0 / factor)
        self.running[jid] = running
        self.moved_w.add(jid)
        self.moved_r.add(jid)
        remaining = max(0.0, st.job.duration - view.done)
        heapq.heappush(self.done_heap, (now + st.overhead + remaining * factor, jid, st.epoch))

    def _check_quota(self, view: TaskView) -> None:
        q = self.quotas
        assert q is not None
        if f"user:{view.owner}" in q.exhausted or f"group:{view.group}" in q.exhausted:
            raise PolicyError(f"task {view.id}: its user or group has no GPU-hours left")
        cap = q.user(view.owner).max_gpus
        if cap is not None and self.held_user.get(view.owner, 0) + view.gpus > cap:
            raise PolicyError(f"task {view.id}: user {view.owner} would hold more than {cap} GPUs")
        cap = q.group(view.group).max_gpus
        if cap is not None and self.held_group.get(view.group, 0) + view.gpus > cap:
            raise PolicyError(f"task {view.id}: group {view.group} would hold more than {cap} GPUs")

    def _preempt(self, jid: int, now: float) -> None:
        view = self.running.get(jid)
        if view is None:
            raise PolicyError(f"preemption of task {jid}, which is not running")
        if not view.preemptible:
            raise PolicyError(f"preemption of task {jid}, which is not preemptible")
        assert view.start is not None and view.placement is not None
        st = self.state[jid]
        held = now - view.start
        self.busy += view.gpus * held
        st.run_time += held
        st.preemptions += 1
        st.epoch += 1
        progress = max(0.0, held - st.overhead) * view.rate
        self._unhold(view)
        del self.running[jid]
        self.moved_w.add(jid)
        self.moved_r.add(jid)
        self.waiting[jid] = _copy(view, now, min(st.job.duration, view.done + progress),
                                  view.attained + view.gpus * held, None, None, 1.0)

    def _unhold(self, view: TaskView) -> None:
        self.held_user[view.owner] -= view.gpus
        self.held_group[view.group] -= view.gpus
        self._free(view.placement)

    def _free(self, placement: Placement | None) -> None:
        assert placement is not None
        for s in placement.nodes:
            k = self.index[s.node]
            self.free[k].update(s.gpus)
            self.free_total += len(s.gpus)
            self._refresh(k)

    def _refresh(self, k: int) -> None:
        n = self.nodes[k]
        self.nodes[k] = NodeView(n.name, n.gpus, n.switch, tuple(sorted(self.free[k])))


def _copy(v: TaskView, queued: float, done: float, attained: float, start: float | None,
          placement: Placement | None, rate: float) -> TaskView:
    """``dataclasses.replace`` of these fields, without its per-call introspection (a hot path)."""
    return TaskView(v.id, v.owner, v.group, v.submit, v.nodes, v.gpus_per_node, v.predicted, v.duration, v.qos,
                    v.preemptible, v.flexible, attained, done, queued, start, placement, rate, v.time_limit,
                    v.priority, v.spread_ok)


# ``_copy`` passes every field of TaskView in this order: a new field must be added there
assert [f.name for f in fields(TaskView) if f.init] == [
    "id", "owner", "group", "submit", "nodes", "gpus_per_node", "predicted", "duration", "qos", "preemptible",
    "flexible", "attained", "done", "queued", "start", "placement", "rate", "time_limit", "priority", "spread_ok"]


def simulate(jobs: Sequence[Job], cluster: ClusterSpec, policy: Policy, slowdown: SlowdownTable | None = None,
             predictor: Predictor | None = None, restart_overhead: float = 30.0,
             quotas: Quotas | None = None, estimates: StartEstimates | None = None) -> Result:
    """Replay ``jobs`` on ``cluster`` under ``policy`` (see the module docstring); with ``estimates``, record
    the start estimates of waiting jobs in it (``estimates.StartEstimates``: the same decisions, slower)."""
    return Simulator(jobs, cluster, policy, slowdown, predictor, restart_overhead, quotas, estimates).run()
