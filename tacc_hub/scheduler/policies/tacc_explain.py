"""``Tacc.explain``: why each waiting task waits, its position, and when it should start.

Position is the task's place in ``tacc``'s order (1 = next). The estimate is a
forward projection in that order that plays ``tacc``'s preemption: GPUs free now;
each running task's GPUs at its expected end (median remaining time given its
attained service) or, if preemptible, once it drops to its next level (and is
``min_run`` old), when the tasks of its old level may take them; and a
preemptible running task ranked below a waiting task gives that task its GPUs
as soon as it is ``min_run`` old. Each waiting task in turn starts when enough
GPUs are free and holds them for its median run time (run times are
heavy-tailed), or, if preemptible, until it would drop a level. The projection
counts GPUs, not shapes, does not backfill and does not know of later arrivals
(which may rank ahead), so estimates never decrease with position, except
that a task at its user's or group's GPU cap (reason ``Quota``) starts no earlier
than the GPUs holding that cap are expected back (``capwait.CapClock``): it may
show a later time than tasks behind it, which the scheduler starts past it.
The service shows it corrected by how past estimates came out (``calibration``).

Reasons: ``OverQuota`` (it can never start under the quotas: ``explain.over_quota``; no
estimate), ``Quota`` (its user or group is exhausted: no estimate; or at its
``max_gpus`` cap), ``Resources`` (fewer GPUs free than it needs), ``Topology``
(enough GPUs free, but not in a shape it may use, or it waits for a packed
placement), ``Priority`` (it fits, but tasks ahead of it, or the head's
reservation, hold the GPUs).

Invariants: every waiting task gets exactly one explanation; positions are
1..n with no gaps; estimated starts are >= ``view.now`` and, apart from tasks at a
cap, non-decreasing in position (None only where the task can never start under the current quotas
or is larger than the cluster). Cost: one walk of the order plus a heap over
running tasks and a walk of the preemptible ones (worst first) per task that
does not fit; placement is tested once per distinct shape.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING

from ..capwait import CapClock
from ..explain import OVER_QUOTA, over_quota
from ..history import BUCKETS, lower
from ..policy import Explanation, Quotas, TaskView, View
from ..topology import FreeMap, switches_of
from .tacc_model import age_bucket
from .tacc_queue import level_gt
from .tacc_running import expected_end

if TYPE_CHECKING:
    from .tacc import Tacc
    from .tacc_queue import Queue


def explain(policy: Tacc, view: View) -> dict[int, Explanation]:
    q, now, quotas = policy.queue, view.now, view.quotas
    free = FreeMap(view.nodes)
    capacity = sum(n.gpus for n in view.nodes)
    held_u: dict[str, int] = {}
    held_g: dict[str, int] = {}
    ends: list[tuple[float, int, int]] = []  # (expected end, GPUs, running task id; -1: a projected start)
    caps = CapClock()  # when the GPUs holding each user's and group's cap are expected back
    min_run = getattr(policy, "min_run", 0.0)
    victims: list[tuple[int, int, int, float, int, int]] = []  # preemptible runs: (level, when it may go, GPUs, id)
    for t in view.running.values():
        end = expected_end(t, q, now)
        caps.add(f"user:{t.owner}", end, t.gpus)
        caps.add(f"group:{t.group}", end, t.gpus)
        if t.preemptible and t.rate > 0:  # its level's tasks take its GPUs once it drops a level
            done = t.done_at(now)
            at = now + _to_next_level(t, q, done) / t.rate
            end = min(end, max(at, (t.start if t.start is not None else now) + min_run))
        ends.append((end, t.gpus, t.id))
        if t.preemptible:
            r = q.rank(t, now)
            victims.append((r[0], r[1], r[2], (t.start if t.start is not None else now) + min_run, t.gpus, t.id))
        held_u[t.owner] = held_u.get(t.owner, 0) + t.gpus
        held_g[t.group] = held_g.get(t.group, 0) + t.gpus
    heapq.heapify(ends)
    victims.sort(reverse=True)  # the worst first
    gone: set[int] = set()  # running tasks the projection preempted (their ends no longer count)
    vi = 0  # victims before this one are all gone
    avail, clock = free.total, now
    shapes: dict[tuple[int, int, bool, bool], bool] = {}
    out: dict[int, Explanation] = {}
    # (median run, time it holds its GPUs) by what they depend on (the curve: its context's, or its group's)
    runs: dict[tuple[int, float, float | None, float, bool], tuple[float, float]] = {}
    no_history = q.model.version == 0  # no history: the estimate depends on the task's prediction
    pos = 0
    for rk, t in q.ranked(view):
        pos += 1
        reason, detail, never = _quota(t, quotas, held_u, held_g) if quotas is not None else (None, "", False)
        if reason is None and t.gpus > capacity:
            never, reason, detail = True, "Resources", f"needs {t.gpus} GPUs; the cluster has {capacity}"
        if reason is None:
            if t.gpus > free.total:
                reason, detail = "Resources", f"needs {t.gpus} GPUs; {free.total} free"
            else:
                shape = (t.nodes, t.gpus_per_node, t.flexible, t.spread_ok)
                packed = shapes.get(shape)
                if packed is None:
                    packed = shapes[shape] = _packed(free, t)
                if packed:
                    reason, detail = "Priority", "fits now, behind higher-ranked tasks or the head's reservation"
                else:
                    reason = "Topology"
                    detail = (f"needs {t.gpus} GPUs " + ("on one switch" if not t.spread_ok else "packed")
                              + f"; {free.total} free, scattered")
        if never:
            out[t.id] = Explanation(reason or "Quota", pos, None, detail)
            continue
        while avail < t.gpus:
            # a preemptible run ranked below this task that may go by now gives its GPUs up (worst first)
            while vi < len(victims) and victims[vi][5] in gone:
                vi += 1
            took = False
            soonest = math.inf
            for j in range(vi, len(victims)):
                v = victims[j]
                if not level_gt(v[0], v[1], v[2], rk[0], rk[1], rk[2]):
                    break
                if v[5] in gone:
                    continue
                if v[3] <= clock:
                    gone.add(v[5])
                    avail += v[4]
                    took = True
                    break
                soonest = min(soonest, v[3])
            if took:
                continue
            while ends and ends[0][2] in gone:
                heapq.heappop(ends)
            if ends and ends[0][0] <= soonest:
                end, gpus, _ = heapq.heappop(ends)
                clock = max(clock, end)
                avail += gpus
            elif soonest < math.inf:
                clock = max(clock, soonest)
            else:
                break
        avail -= t.gpus
        start = clock
        if reason == "Quota" and quotas is not None:  # at a cap: not before the GPUs holding it come back
            start = max(caps.earliest(f"user:{t.owner}", t.gpus, quotas.user(t.owner).max_gpus, clock),
                        caps.earliest(f"group:{t.group}", t.gpus, quotas.group(t.group).max_gpus, clock))
        curve = q.curve(t)
        k = (id(curve), t.done, t.time_limit, t.predicted if no_history else 0.0, t.preemptible)
        got = runs.get(k)
        if got is None:
            run = _median_run(t, q)
            # a preemptible one holds its GPUs until it drops a level: the tasks of its level take them then
            hold = min(run, max(min_run, _to_next_level(t, q, t.done))) if t.preemptible else run
            got = runs[k] = (run, hold)
        run, hold = got
        heapq.heappush(ends, (start + hold, t.gpus, -1))
        caps.add(f"user:{t.owner}", start + run, t.gpus)
        caps.add(f"group:{t.group}", start + run, t.gpus)
        out[t.id] = Explanation(reason, pos, start, detail)
    return out


def _median_run(t: TaskView, q: Queue) -> float:
    """How long a waiting task should hold its GPUs: its median remaining time, capped by its limit."""
    left = q.curve(t).median_left[age_bucket(t.done)] if q.model.version else max(1.0, t.predicted - t.done)
    if t.time_limit is not None:
        left = min(left, max(1.0, t.time_limit - t.done))
    return left


def _to_next_level(t: TaskView, q: Queue, done: float) -> float:
    """Service left before ``t`` drops to its next level (inf: it never does)."""
    if not q.model.version:
        return math.inf
    nxt = q.curve(t).next_level[age_bucket(done)]
    return max(0.0, lower(nxt) - done) if nxt < BUCKETS else math.inf


def _quota(t: TaskView, quotas: Quotas, held_u: dict[str, int],
           held_g: dict[str, int]) -> tuple[str | None, str, bool]:
    over = over_quota(t, quotas)  # can never start under these quotas (the live queue keeps it out of view)
    if over is not None:
        return OVER_QUOTA, over, True
    if f"user:{t.owner}" in quotas.exhausted:
        return "Quota", f"user {t.owner} has no GPU-hours left", True
    if f"group:{t.group}" in quotas.exhausted:
        return "Quota", f"group {t.group} has no GPU-hours left", True
    cap = quotas.user(t.owner).max_gpus
    if cap is not None and held_u.get(t.owner, 0) + t.gpus > cap:
        return "Quota", f"user {t.owner} at its cap of {cap} GPU{'' if cap == 1 else 's'}", t.gpus > cap
    cap = quotas.group(t.group).max_gpus
    if cap is not None and held_g.get(t.group, 0) + t.gpus > cap:
        return "Quota", f"group {t.group} at its cap of {cap} GPU{'' if cap == 1 else 's'}", t.gpus > cap
    return None, "", False


def _packed(free: FreeMap, t: TaskView) -> bool:
    fit = free.fit(t.nodes, t.gpus_per_node, t.flexible)
    if fit is None:
        return False
    return not fit.spread or (t.spread_ok and switches_of(fit.placement, free.switch) == 1
                              and len(fit.placement.nodes) == t.nodes)
