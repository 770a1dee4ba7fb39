"""The live queue: the service's tasks as a policy sees them, and the policy's answers checked.

``LiveQueue`` keeps the waiting and running tasks (``TaskView``) and the
``ClusterState``. ``plan(now, quotas)`` builds a ``View``, asks the policy, checks
every action against the contract (``policy``) and returns the starts (slots
already allocated in the cluster) and the preemptions for the caller to carry
out. The same policy code runs here and in the simulator.

Live differences from the simulator, each deliberate:
- A preempted task is told to stop and given a grace period to checkpoint; its
  slots stay held until it has exited (``preempting``), and it is not shown to
  the policy as running meanwhile (it cannot be preempted twice). A start that
  needed those slots is simply not made now: the next pass, after the exit,
  decides again.
- ``max_running`` (tasks per user, GPU or not) is applied before the policy:
  a user at the cap has no task in the view; ``explain`` says why.
- A task that can never start under the quotas in force (``explain.over_quota``: a quota
  lowered below what it needs) is in no policy's view; ``explain`` says ``OverQuota``.
- A policy that does not declare ``quota_aware = True`` never sees quotas:
  the queue keeps the tasks a quota blocks out of its view, and refuses (quietly)
  a start that would cross a cap within the pass.
- Tasks without GPUs start at once (on the first eligible nodes): there is
  nothing for a policy to share; ``max_running`` still applies to them.
- Node constraints (a partition, a GPU type) are kept out of the policy
  contract: tasks that have one are scheduled in a pass of their own over the
  eligible nodes only (one pass per constraint, then one for the rest over all
  nodes, each seeing the slots taken by the passes before it).

Invariants:
- No GPU slot is handed out twice (``ClusterState.allocate`` is all-or-nothing
  and refuses held slots); no start takes a user or group above its quota cap;
  only preemptible running tasks are preempted. An action that breaks the
  contract is dropped and logged, never applied.
- ``waiting`` is in id order (submission order): the order a policy's ties use.
- Pure apart from logging: no I/O, no clock (``now`` is passed in).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from .calibration import Calibration
from .cluster import ClusterState, NodeSlots, Placement
from .explain import cap_clock, cap_start, held_by, quota_block, quota_reason, startable
from .explain import explain as generic_explain
from .frozen import Frozen
from .history import DurationHistory
from .policy import Action, Explanation, Policy, Preempt, Quotas, Start, TaskView, View, Wake

log = logging.getLogger("tacc_hub.scheduler")


@dataclass(frozen=True, slots=True)
class Plan(Frozen):
    starts: list[Start]
    preempts: list[Preempt]
    wake_at: float | None = None  # the policy asked to be called again at this time


class LiveQueue:
    def __init__(self, cluster: ClusterState, policy: Policy, max_running: int | None = None) -> None:
        self.cluster = cluster
        self.policy = policy
        self.max_running = max_running
        self.waiting: dict[int, TaskView] = {}
        self.running: dict[int, TaskView] = {}
        self.preempting: set[int] = set()
        self.constraints: dict[int, tuple[str | None, str | None]] = {}  # task -> (partition, gpu type)
        self.history = DurationHistory()  # run times of ended tasks, per group: what a policy may learn from
        self.calibration = Calibration()  # corrects ``explain``'s estimates by how past ones came out

    # --- bookkeeping ---------------------------------------------------------------------

    def add(self, task: TaskView, partition: str | None = None, gpu_type: str | None = None) -> None:
        """A task enters the queue (submitted, recovered, or requeued); it may run only on such nodes."""
        if partition is not None or gpu_type is not None:
            self.constraints[task.id] = (partition, gpu_type)
        last = next(reversed(self.waiting), None) if self.waiting else None
        self.waiting[task.id] = task
        if last is not None and task.id < last:
            self.waiting = dict(sorted(self.waiting.items()))

    def adopt(self, task: TaskView, placement: Placement, start: float) -> None:
        """A task found running at recovery."""
        self.cluster.adopt(task.id, placement)
        self.running[task.id] = replace(task, start=start, placement=placement)

    def drop(self, task_id: int) -> None:
        """A task left for good (cancelled while waiting, or ended): forget it and free its slots."""
        self.waiting.pop(task_id, None)
        self.running.pop(task_id, None)
        self.calibration.forget(task_id)
        self.preempting.discard(task_id)
        self.constraints.pop(task_id, None)
        self.cluster.release(task_id)

    def requeue(self, task_id: int, now: float) -> TaskView | None:
        """A preempted task has stopped: free its slots; it waits again, keeping its submit time."""
        t = self.running.pop(task_id, None)
        self.preempting.discard(task_id)
        self.cluster.release(task_id)
        if t is None:
            return None
        ran = max(0.0, now - t.start) if t.start is not None else 0.0
        back = replace(t, start=None, placement=None, queued=now, attained=t.attained + t.gpus * ran,
                       done=t.done + ran * t.rate)
        self.add(back)
        return back

    def unstart(self, task_id: int) -> None:
        """A start that could not be carried out (cancelled meanwhile): free the slots, forget the task."""
        self.drop(task_id)

    # --- a pass --------------------------------------------------------------------------

    def _pools(self) -> list[tuple[dict[int, TaskView], set[str] | None]]:
        """The passes: (waiting tasks, eligible node names or None for all), constrained pools first."""
        waiting = self.waiting
        if self.max_running is not None:
            counts: dict[str, int] = {}
            for t in self.running.values():
                counts[t.owner] = counts.get(t.owner, 0) + 1
            if any(c >= self.max_running for c in counts.values()):
                waiting = {k: t for k, t in waiting.items() if counts.get(t.owner, 0) < self.max_running}
        if not self.constraints or not any(k in self.constraints for k in waiting):
            return [(waiting, None)]
        pools: dict[tuple[str | None, str | None], dict[int, TaskView]] = {}
        rest: dict[int, TaskView] = {}
        for k, t in waiting.items():
            c = self.constraints.get(k)
            (rest if c is None else pools.setdefault(c, {}))[k] = t
        out: list[tuple[dict[int, TaskView], set[str] | None]] = []
        for (part, gtype), tasks in sorted(pools.items(), key=lambda e: (e[0][0] or "", e[0][1] or "")):
            names = {n.name for n in self.cluster.nodes.values()
                     if (part is None or n.partition == part) and (gtype is None or n.gpu_type == gtype)}
            out.append((tasks, names))
        if rest:
            out.append((rest, None))
        return out

    def _view(self, now: float, quotas: Quotas | None, waiting: dict[int, TaskView],
              names: set[str] | None) -> View:
        running = self.running if not self.preempting else {
            k: t for k, t in self.running.items() if k not in self.preempting}
        waiting = startable(waiting, quotas)  # a task that can never start under the quotas waits out of view
        if quotas is not None and not getattr(self.policy, "quota_aware", False):
            waiting = self._unblocked(waiting, quotas)
            quotas = None
        nodes = self.cluster.view()
        usable = self.cluster.schedulable()  # drained/down nodes: not in the view, nor the tasks running there
        if usable is not None:
            names = usable if names is None else names & usable
        if names is not None:
            nodes = tuple(n for n in nodes if n.name in names)
            running = {k: t for k, t in running.items()
                       if t.placement is not None and all(s.node in names for s in t.placement.nodes)}
        return View(now, waiting, running, nodes, quotas, self.history)

    def _unblocked(self, waiting: dict[int, TaskView], q: Quotas) -> dict[int, TaskView]:
        """The tasks no quota keeps from starting now (for policies that do not read quotas)."""
        users, groups = held_by(self.running.values())
        room: dict[tuple[str, str], float] = {}  # (user, group) -> GPUs the pair may still take
        inf = float("inf")
        out: dict[int, TaskView] = {}
        for k, t in waiting.items():
            key = (t.owner, t.group)
            r = room.get(key)
            if r is None:
                if f"user:{t.owner}" in q.exhausted or f"group:{t.group}" in q.exhausted:
                    r = -1.0
                else:
                    cu, cg = q.user(t.owner).max_gpus, q.group(t.group).max_gpus
                    r = min(inf if cu is None else cu - users.get(t.owner, 0),
                            inf if cg is None else cg - groups.get(t.group, 0))
                room[key] = r
            if t.gpus <= r:
                out[k] = t
        return out

    def views(self, now: float, quotas: Quotas | None = None) -> list[View]:
        """The views of one pass as the cluster is now (see the module docstring)."""
        return [self._view(now, quotas, w, names) for w, names in self._pools()]

    def plan(self, now: float, quotas: Quotas | None = None) -> Plan:
        if not self.waiting:
            return Plan([], [])
        starts: list[Start] = []
        preempts: list[Preempt] = []
        wake: float | None = None
        for waiting, names in self._pools():
            if not waiting:
                continue
            s, p, w = self._pass(self._view(now, quotas, waiting, names), quotas)  # sees the slots taken before
            starts += s
            preempts += p
            if w is not None:
                wake = w if wake is None else min(wake, w)
        return Plan(starts, preempts, wake)

    def _pass(self, view: View, quotas: Quotas | None) -> tuple[list[Start], list[Preempt], float | None]:
        now = view.now
        waiting = view.waiting  # every task of this pass, the ones started here without the policy included
        cpu = [t for t in waiting.values() if t.gpus == 0]
        actions: list[Action] = [Start(t.id, self._cpu_placement(t, view), "no GPUs: started at once") for t in cpu]
        if cpu:
            view = replace(view, waiting={k: t for k, t in view.waiting.items() if t.gpus})
        if view.waiting:
            actions += self.policy.schedule(view)
        users, groups = held_by(self.running.values())
        starts: list[Start] = []
        preempts: list[Preempt] = []
        wake: float | None = None
        per_user: dict[str, int] = {}  # running tasks per user, for max_running
        for r in self.running.values():
            per_user[r.owner] = per_user.get(r.owner, 0) + 1
        for a in actions:
            if isinstance(a, Wake):
                wake = a.at if wake is None else min(wake, a.at)
            elif isinstance(a, Preempt):
                t = view.running.get(a.task_id)
                if t is None or not t.preemptible or a.task_id in self.preempting:
                    log.error("policy %s: preemption of task %s refused (not a preemptible running task)",
                              self.policy.name, a.task_id)
                    continue
                self.preempting.add(a.task_id)
                preempts.append(a)
            elif isinstance(a, Start):
                t = waiting.get(a.task_id)
                if t is not None and t.gpus == 0 and not a.placement.nodes:
                    a = replace(a, placement=self._cpu_placement(t, view))
                if t is None or not self._start_ok(t, a.placement, view, quotas, users, groups, per_user):
                    continue
                try:
                    self.cluster.allocate(t.id, a.placement)
                except ValueError:
                    continue  # slots of a task still stopping after preemption: decided again next pass
                del self.waiting[t.id]
                self.running[t.id] = replace(t, start=now, placement=a.placement)
                self.calibration.started(t.id, now)
                users[t.owner] = users.get(t.owner, 0) + t.gpus
                groups[t.group] = groups.get(t.group, 0) + t.gpus
                per_user[t.owner] = per_user.get(t.owner, 0) + 1
                starts.append(a)
        return starts, preempts, wake

    def _cpu_placement(self, t: TaskView, view: View) -> Placement:
        """A task without GPUs still runs on nodes: the first eligible ones (policies place GPUs only)."""
        names = [n.name for n in view.nodes][: max(1, t.nodes)]
        return Placement(nodes=[NodeSlots(node=n, gpus=[]) for n in names])

    def _start_ok(self, t: TaskView, placement: Placement, view: View, quotas: Quotas | None,
                  users: dict[str, int], groups: dict[str, int], per_user: dict[str, int]) -> bool:
        eligible = {n.name for n in view.nodes}
        why = None
        if placement.gpu_count != t.gpus or (not t.flexible and (
                len(placement.nodes) != t.nodes or any(len(s.gpus) != t.gpus_per_node for s in placement.nodes))):
            why = f"placement {placement} is not the task's shape {t.nodes} x {t.gpus_per_node}"
        elif len({s.node for s in placement.nodes}) != len(placement.nodes):
            why = "a node appears twice"
        elif any(s.node not in eligible for s in placement.nodes):
            why = "a node outside the task's partition or GPU type"
        elif quota_block(t, quotas, users, groups) is not None:
            if view.quotas is None:  # a quota-unaware policy: the queue applies the quotas
                return False
            why = f"quota: {quota_block(t, quotas, users, groups)}"
        elif self.max_running is not None and per_user.get(t.owner, 0) >= self.max_running:
            return False  # the user reached the cap within this pass: the next pass explains it
        if why is not None:
            log.error("policy %s: start of task %s refused: %s", self.policy.name, t.id, why)
            return False
        return True

    # --- explaining ----------------------------------------------------------------------

    def explain(self, now: float, quotas: Quotas | None = None) -> dict[int, Explanation]:
        """Why each waiting task waits, its position and estimated start (see ``explain``), the estimates corrected
        by how past ones came out (``calibration``)."""
        fn = getattr(self.policy, "explain", None)
        out: dict[int, Explanation] = {}
        for view in self.views(now, quotas):
            got = fn(view) if fn is not None else generic_explain(view, list(view.waiting.values()))
            if len(out):  # positions count over the passes, in the order they are served
                got = {k: replace(e, position=e.position + len(out)) for k, e in got.items()}
            out.update(got)
        if len(out) < len(self.waiting):  # kept out of the views by a quota or the running cap
            n = len(out)
            users, groups = held_by(self.running.values())
            caps = cap_clock(self.running.values(), now) if quotas is not None else None
            for tid, t in self.waiting.items():
                if tid not in out:
                    n += 1
                    held = quota_reason(t, quotas, users, groups)
                    reason, why = held or (
                        "Quota", f"user {t.owner} has {self.max_running} tasks running, the most allowed")
                    est = None  # at a cap: when the GPUs holding it are expected back
                    if held is not None and reason == "Quota" and caps is not None and quotas is not None:
                        est = cap_start(caps, t, quotas, now)
                    out[tid] = Explanation(reason, n, est, why)
        self.calibration.asked(now, out)
        return self.calibration.adjust(now, out)
