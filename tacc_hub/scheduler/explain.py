"""Explain a queue: reason, position and estimated start of every waiting task.

``project(view, order)`` walks the waiting tasks in the order a policy would start
them and gives each the earliest time enough GPUs are free for it, if every
running task ends when predicted (``start + predicted``, never before now) and
every task projected before it runs for its own prediction. This is the
estimate Slurm's backfill scheduler reports (``squeue --start``): counted in
GPUs, not exact slots, and only as good as the predictions.

``explain(view, order)`` adds a reason (``policy.REASONS``):
- ``OverQuota``: it can never start under the quotas in force (it needs more GPUs
  than a cap, or more GPU-hours, GPUs x time limit, than a whole budget: an admin
  lowered a quota after it was submitted). No estimate. It is not ended: it stays
  queued (as Slurm keeps a job pending with ``AssocMaxGRESPerJob``), kept out of the
  policy's view (``LiveQueue``), and starts as usual once the quota is raised. The
  detail is the submit check's own words (``quota.refusal``), see ``over_quota``;
- ``Quota``: its user or group is out of GPU-hours, or starting it would take
  them above their GPU cap (no estimate while the budget is exhausted; at a cap,
  not before the GPUs holding it are expected back: ``capwait.CapClock``);
- ``Topology``: enough GPUs are free now, but not in the shape it needs;
- ``Priority``: it would fit now, but tasks ahead of it come first;
- ``Resources``: not enough GPUs are free.

Invariants: pure; every waiting task of ``order`` gets an explanation; positions
are 1..n in ``order``; estimated starts are >= ``view.now``. Cost O(n log n).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

from .capwait import CapClock
from .policy import Explanation, Quotas, TaskView, View
from .quota import refusal
from .topology import FreeMap

OVER_QUOTA = "OverQuota"


def held_by(running: Iterable[TaskView]) -> tuple[dict[str, int], dict[str, int]]:
    """GPUs held per user and per group."""
    users: dict[str, int] = {}
    groups: dict[str, int] = {}
    for t in running:
        users[t.owner] = users.get(t.owner, 0) + t.gpus
        groups[t.group] = groups.get(t.group, 0) + t.gpus
    return users, groups


def over_quota(t: TaskView, q: Quotas | None) -> str | None:
    """Why ``t`` can never start under the quotas ``q``, or None: the submit check (``quota.refusal``), then what
    happens to it. E.g. "can never start under the current quota: needs 4 GPUs; user bob may hold at most 2
    (2 over); it stays queued and starts if the quota is raised, or cancel it"."""
    if q is None or t.gpus <= 0:
        return None
    limit = t.time_limit if t.time_limit is not None else math.inf
    why = refusal(q, t.owner, t.group, t.gpus, limit, period=q.period)
    if why is None:
        return None
    return f"can never start under the current quota: {why}; it stays queued and starts if the quota is raised, " \
        "or cancel it"


def startable(waiting: dict[int, TaskView], q: Quotas | None) -> dict[int, TaskView]:
    """``waiting`` without the tasks that can never start under ``q`` (``over_quota``); ``waiting`` itself
    when there are none. One check per distinct (owner, group, GPUs, time limit)."""
    if q is None:
        return waiting
    seen: dict[tuple[str, str, int, float | None], bool] = {}
    held: list[int] = []
    for k, t in waiting.items():
        key = (t.owner, t.group, t.gpus, t.time_limit)
        over = seen.get(key)
        if over is None:
            over = seen[key] = over_quota(t, q) is not None
        if over:
            held.append(k)
    if not held:
        return waiting
    out = dict(waiting)
    for k in held:
        del out[k]
    return out


def quota_reason(t: TaskView, q: Quotas | None, users: dict[str, int],
                 groups: dict[str, int]) -> tuple[str, str] | None:
    """``(reason, detail)`` when a quota keeps ``t`` from starting now (``OverQuota``: never under these quotas,
    checked first, since it outlasts a spent budget; else ``Quota``), or None."""
    over = over_quota(t, q)
    if over is not None:
        return OVER_QUOTA, over
    why = quota_block(t, q, users, groups)
    return None if why is None else ("Quota", why)


def quota_block(t: TaskView, q: Quotas | None, users: dict[str, int], groups: dict[str, int]) -> str | None:
    """Why a quota keeps ``t`` from starting now, or None (a task that can never start included)."""
    if q is None:
        return None
    over = over_quota(t, q)
    if over is not None:
        return over
    if f"user:{t.owner}" in q.exhausted:
        return f"user {t.owner} has used this period's GPU-hours"
    if f"group:{t.group}" in q.exhausted:
        return f"group {t.group} has used this period's GPU-hours"
    cap = q.user(t.owner).max_gpus
    if cap is not None and users.get(t.owner, 0) + t.gpus > cap:
        return f"user {t.owner} holds {users.get(t.owner, 0)} of at most {cap} GPU{'' if cap == 1 else 's'}"
    cap = q.group(t.group).max_gpus
    if cap is not None and groups.get(t.group, 0) + t.gpus > cap:
        return f"group {t.group} holds {groups.get(t.group, 0)} of at most {cap} GPU{'' if cap == 1 else 's'}"
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
    never: dict[int, str] = {}  # can never start under these quotas: no estimate, no GPUs in the projection
    if q is not None:
        for t in order:
            why = over_quota(t, q)
            if why is not None:
                never[t.id] = why
    starts = project(view, [t for t in order if t.id not in never and not (
        q and (f"user:{t.owner}" in q.exhausted or f"group:{t.group}" in q.exhausted))])
    free = FreeMap(view.nodes)
    shapes: dict[tuple[int, int, bool, bool], bool] = {}  # shape -> fits now (fit is O(nodes): once per shape)
    out: dict[int, Explanation] = {}
    caps = cap_clock(view.running.values(), view.now) if q is not None else None
    for pos, t in enumerate(order, 1):
        est = starts.get(t.id)
        blocked = quota_block(t, q, users, groups)
        if t.id in never:
            out[t.id] = Explanation(OVER_QUOTA, pos, None, never[t.id])
        elif blocked:
            if est is not None and caps is not None and q is not None:  # not before the GPUs at the cap are back
                est = cap_start(caps, t, q, est)
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


def cap_clock(running: Iterable[TaskView], now: float) -> CapClock:
    """Expected ends of every user's and group's running GPUs, as ``project`` ends them."""
    caps = CapClock()
    for t in running:
        end = max(now, (t.start if t.start is not None else now) + max(0.0, t.predicted - t.done) / (t.rate or 1.0))
        caps.add(f"user:{t.owner}", end, t.gpus)
        caps.add(f"group:{t.group}", end, t.gpus)
    return caps


def cap_start(caps: CapClock, t: TaskView, q: Quotas, at: float) -> float | None:
    """The earliest start >= ``at`` that ``t``'s user and group caps allow; None while a budget is spent."""
    if f"user:{t.owner}" in q.exhausted or f"group:{t.group}" in q.exhausted:
        return None
    return max(caps.earliest(f"user:{t.owner}", t.gpus, q.user(t.owner).max_gpus, at),
               caps.earliest(f"group:{t.group}", t.gpus, q.group(t.group).max_gpus, at))


def _fits(free: FreeMap, t: TaskView, cache: dict[tuple[int, int, bool, bool], bool]) -> bool:
    key = (t.nodes, t.gpus_per_node, t.flexible, t.spread_ok)
    ok = cache.get(key)
    if ok is None:
        fit = free.fit(t.nodes, t.gpus_per_node, t.flexible)
        ok = fit is not None and (t.spread_ok or len({free.switch[s.node] for s in fit.placement.nodes}) == 1)
        cache[key] = ok
    return ok
