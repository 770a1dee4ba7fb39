"""Explain a queue: reason, position and estimated start of every waiting task.

``project(view, order)`` walks the waiting tasks in the order a policy would start
them and gives each the earliest time enough GPUs are free for it, if every
running task ends when predicted (``start + predicted``, never before now) and
every task projected before it runs for its own prediction. This is the
estimate Slurm's backfill scheduler reports (``squeue --start``): counted in
GPUs, not exact slots, and only as good as the predictions.

``explain(view, order)`` adds a reason (``policy.REASONS``):
- ``Quota``: its user or group is out of GPU-hours, or starting it would take
  them above their GPU cap (no estimate while the budget is exhausted);
- ``Topology``: enough GPUs are free now, but not in the shape it needs;
- ``Priority``: it would fit now, but tasks ahead of it come first;
- ``Resources``: not enough GPUs are free.

Invariants: pure; every waiting task of ``order`` gets an explanation; positions
are 1..n in ``order``; estimated starts are >= ``view.now``. Cost O(n log n).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from .policy import Explanation, Quotas, TaskView, View
from .topology import FreeMap


def held_by(running: Iterable[TaskView]) -> tuple[dict[str, int], dict[str, int]]:
    """GPUs held per user and per group."""
    users: dict[str, int] = {}
    groups: dict[str, int] = {}
    for t in running:
        users[t.owner] = users.get(t.owner, 0) + t.gpus
        groups[t.group] = groups.get(t.group, 0) + t.gpus
    return users, groups


def quota_block(t: TaskView, q: Quotas | None, users: dict[str, int], groups: dict[str, int]) -> str | None:
    """Why a quota keeps ``t`` from starting now, or None."""
    if q is None:
        return None
    if f"user:{t.owner}" in q.exhausted:
        return f"user {t.owner} has used this period's GPU-hours"
    if f"group:{t.group}" in q.exhausted:
        return f"group {t.group} has used this period's GPU-hours"
    cap = q.user(t.owner).max_gpus
    if cap is not None and users.get(t.owner, 0) + t.gpus > cap:
        return f"user {t.owner} holds {users.get(t.owner, 0)} of at most {cap} GPUs"
    cap = q.group(t.group).max_gpus
    if cap is not None and groups.get(t.group, 0) + t.gpus > cap:
        return f"group {t.group} holds {groups.get(t.group, 0)} of at most {cap} GPUs"
    return None


def project(view: View, order: Iterable[TaskView]) -> dict[int, float]:
    """Estimated start of each task of ``order`` (see the module docstring)."""
    now = view.now
    avail = sum(len(n.free) for n in view.nodes)
    releases: list[tuple[float, int]] = []
    for t in view.running.values():
        end = (t.start if t.start is not None else now) + max(0.0, t.predicted - t.done) / (t.rate or 1.0)
        releases.append((max(now, end), t.gpus))
    heapq.heapify(releases)
    total = sum(n.gpus for n in view.nodes)
    t_now = now
    out: dict[int, float] = {}
    for task in order:
        if task.gpus > total:
            continue
        while avail < task.gpus and releases:
            at, gpus = heapq.heappop(releases)
            t_now = max(t_now, at)
            avail += gpus
        out[task.id] = t_now
        avail -= task.gpus
        heapq.heappush(releases, (t_now + task.predicted, task.gpus))
    return out


def explain(view: View, order: list[TaskView]) -> dict[int, Explanation]:
    """An explanation for every task of ``order`` (see the module docstring)."""
    q = view.quotas
    users, groups = held_by(view.running.values())
    starts = project(view, [t for t in order if not (q and (f"user:{t.owner}" in q.exhausted
                                                             or f"group:{t.group}" in q.exhausted))])
    free = FreeMap(view.nodes)
    shapes: dict[tuple[int, int, bool, bool], bool] = {}  # shape -> fits now (fit is O(nodes): once per shape)
    out: dict[int, Explanation] = {}
    for pos, t in enumerate(order, 1):
        est = starts.get(t.id)
        blocked = quota_block(t, q, users, groups)
        if blocked:
            out[t.id] = Explanation("Quota", pos, est, blocked)
        elif t.gpus > free.total:
            out[t.id] = Explanation("Resources", pos, est, f"needs {t.gpus} GPUs; {free.total} free")
        elif not _fits(free, t, shapes):
            out[t.id] = Explanation("Topology", pos, est, f"{free.total} GPUs are free, but not "
                                    f"{t.nodes} node(s) x {t.gpus_per_node} GPUs"
                                    f"{' on one switch' if not t.spread_ok else ''}")
        else:
            out[t.id] = Explanation("Priority", pos, est, "tasks ahead of it start first")
    return out


def _fits(free: FreeMap, t: TaskView, cache: dict[tuple[int, int, bool, bool], bool]) -> bool:
    key = (t.nodes, t.gpus_per_node, t.flexible, t.spread_ok)
    ok = cache.get(key)
    if ok is None:
        fit = free.fit(t.nodes, t.gpus_per_node, t.flexible)
        ok = fit is not None and (t.spread_ok or len({free.switch[s.node] for s in fit.placement.nodes}) == 1)
        cache[key] = ok
    return ok
