"""``tacc``: our policy. Fair, QoS-aware, Gittins-ordered, preemptive, topology-aware, quota-keeping.

Order (``tacc_queue``): QoS class, then the Gittins index of the task's attained
service under the run-time distribution learned from completed tasks (``tacc_model``:
shortest-expected-first that stays robust when predictions are wrong, because a task
that outlives its expectation is demoted) of the task's *context* (its group, GPU
count and the run-time class of its batch, learned from the ends the policy sees;
while none of a batch has ended only its first ``probes`` tasks keep their level),
per GPU, one level better per ``age_step`` waited (nothing waits forever), shifted
by decayed fair share of its group and user; ties by submit time.

A pass walks the waiting tasks in that order:

- Quotas (``View.quotas``): a task of an ``exhausted`` user or group does not
  start; nor one that would take its user or group above ``max_gpus``.
- Placement (``FreeMap``): one node, else one switch, else spread. A task with
  ``spread_ok`` False never spans switches. When only a spread placement is
  free, the task first tries to get a packed one by preempting lower-ranked
  tasks; else it spreads now if the expected wait for a packed placement
  (running tasks ending at their expected times) costs more than the expected
  slowdown (``slowdown(gpus, nodes, min_nodes, switches)`` x its expected run
  time), and waits otherwise. Every start says why in ``Start.note``.
- Preemption: a task that does not fit may preempt preemptible running tasks of
  a strictly worse ``(qos, level)``, the worst first, only as many as
  make it fit, never one in its first ``min_run`` seconds of a run; a group
  below its ``guaranteed_gpus`` may also preempt preemptible tasks of groups
  holding more than their own guarantee, as long as they stay at or above it
  (and, with guarantees configured, no other group's rank takes a task that
  holds its group within its guarantee: no reclaim ping-pong). A
  preempted task goes back to the queue keeping its submit time (its place by age).
- Backfill: the first task that cannot start (the head) holds a reservation at
  the time enough GPUs should be free (expected ends); a later task starts only
  if it should end by then, or fits in the GPUs the head leaves spare, or is
  preemptible and ranked strictly below the head (the head can take its GPUs
  back, at once: ``min_run`` does not shield such a task from it, ``take_back``,
  so a stream of small tasks cannot hold a big head back). At most
  ``max_backfill_test`` tasks are tried after the head (Slurm's
  ``bf_max_job_test``), which bounds a pass.

Invariants: the contract's (``policy``): no GPU twice (one ``FreeMap``), gang,
only preemptible victims, quotas kept as actions apply in order, ``spread_ok``
kept, pure (state: the queue, fair-share usage and the model, all learned from
views). ``explain`` (``tacc_explain``) gives every waiting task a reason,
position and estimate consistent with this order.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable
from typing import ClassVar

from ..cluster import Placement
from ..policy import Action, Explanation, Preempt, Quotas, Shape, Start, TaskView, View, Wake
from ..topology import FreeCounts, FreeMap, MapCache, Plan, min_nodes
from .tacc_queue import Queue, Rank, level_gt
from .tacc_running import Running

Slowdown = Callable[[int, int, int, int], float]  # (gpus, nodes, min nodes, switches) -> run-time factor >= 1


def default_slowdown(gpus: int, nodes: int, least: int, switches: int) -> float:
    """A spread placement's slowdown when nothing measured is given.

    From the measured placements (``tacc_hub/scheduler/sim/data/placements``): spanning one
    more node than needed costs 1.3x-2.4x (median about 1.7x); more nodes cost a
    little more. Crossing switches (TCP instead of one switch's fabric) is
    charged 1.25x more per extra switch (no measurement: a conservative guess).
    """
    f = 1.0 if nodes <= least else 1.7 + 0.1 * (nodes - least - 1)
    return f * (1.25 ** max(0, switches - 1))


class Tacc:
    name: ClassVar[str] = "tacc"
    preemptive: ClassVar[bool] = True
    oracle: ClassVar[bool] = False
    quota_aware: ClassVar[bool] = True

    def __init__(self, slowdown: Slowdown | None = None, half_life: float = 7 * 86400.0,
                 calc_period: float = 300.0, fair_weight: float = 1.0, level_ratio: float = 4.0,
                 size_exponent: float = 1.0, rebuild_growth: float = 0.05, max_backfill_test: int = 64,
                 min_run: float = 600.0, max_preempt_test: int = 32, max_victims: int = 64,
                 age_step: float = 16 * 86400.0, wake_gap: float = 60.0, context_width: int = 3,
                 batch_gap: float = 1800.0, probes: int = 3, spread_wait: bool = True,
                 take_back: bool = True) -> None:
        """The defaults are one set for every workload; ``benchmarks/bench_scheduler_ablation.py`` switches each
        mechanism off over the whole suite and benchmarks/README.md ("Scheduler ablation", "tacc's tuning
        history") says what each earns.

        ``half_life``, ``calc_period``: Slurm's fair-share decay (7 days) and recompute period (5 min);
        ``fair_weight``: levels a group (user) sinks per doubling over its equal share.
        ``level_ratio``: indices within this factor share a level (FIFO inside, no preemption between).
        ``size_exponent``: the index is per GPU^exponent (1: Tiresias's 2D attained service).
        ``age_step``: a waiting task rises one level per this many seconds waited (0: never).
        ``min_run``: a run is no victim in its first seconds (no ping-pong paying restarts).
        ``max_backfill_test``, ``max_preempt_test``, ``max_victims``: bounds on a pass's work (Slurm's
        bf_max_job_test; preemption searches per pass; victims per search).
        ``context_width``, ``batch_gap``, ``probes``: learned contexts and batches (``tacc_queue``; 0: off).
        ``spread_wait``: when only a spread placement is free, wait for a packed one if that is cheaper.
        ``rebuild_growth``: the model is rebuilt when history grew that much; ``wake_gap``: the least gap
        between two passes without an event (Slurm's sched_interval).
        """
        self.slowdown = slowdown or default_slowdown
        self.rebuild_growth = rebuild_growth
        self.max_backfill_test = max_backfill_test
        self.max_preempt_test = max_preempt_test
        self.max_victims = max_victims
        self.wake_gap = wake_gap
        self.min_run = min_run
        self.take_back = take_back
        self.spread_wait = spread_wait  # False: a task spreads whenever only a spread placement is free
        self.queue = Queue(half_life, calc_period, fair_weight, level_ratio, size_exponent, age_step,
                           context_width, batch_gap, probes)
        self.launched: dict[int, tuple[TaskView, float]] = {}  # started by the last pass: (view, when)
        self.passes = 0
        self.running = Running(min_run)
        self.unshielded: set[int] = set()  # running tasks started below a waiting head: no ``min_run`` for them
        self.maps = MapCache()  # the free slots as of the last view, kept in step (passes work on copies)

    # -- one pass --------------------------------------------------------------------------------

    def _prepare(self, view: View) -> None:
        if self.queue.context_width:
            self._ends_seen(view)
        self.queue.refresh(view, self.rebuild_growth)
        self.running.sync(view, self.queue)
        if self.unshielded:
            self.unshielded = {tid for tid in self.unshielded if tid in view.running}

    def schedule(self, view: View) -> list[Action]:
        if not view.waiting:
            return []
        self._prepare(view)
        out = _Pass(self, view).run()
        self.queue.hint = [a.task_id for a in out if isinstance(a, Start)]  # they leave the queue: cheap sync
        if self.queue.context_width:
            self.launched = {tid: (view.waiting[tid], view.now) for tid in self.queue.hint}
        return out

    def _ends_seen(self, view: View) -> None:
        """Tell the queue of the tasks that ended since the last pass (gone from both running and waiting)."""
        running, waiting, now, q = view.running, view.waiting, view.now, self.queue
        prev = self.running.views  # running as of the last pass
        ch, r = view.changes, self.running
        if ch is not None and ch.since == r.serial and not r.fresh:  # told what changed: look at just those
            gone = [tid for tid in ch.running if tid in prev and tid not in running]
        elif len(prev) != len(running) or prev.keys() != running.keys():
            gone = list(prev.keys() - running.keys())
        else:
            gone = []
        for tid in gone:
            if tid not in waiting:
                q.completed(prev[tid], prev[tid].done_at(now), now)
        for tid, (t, at) in self.launched.items():
            if tid not in running and tid not in waiting and tid not in prev:
                q.completed(t, t.done + now - at, now)
        self.launched = {}
        self.passes += 1
        if self.passes % 10000 == 0:
            q.prune({**view.waiting, **view.running})  # bounds what a long-lived service keeps

    def explain(self, view: View) -> dict[int, Explanation]:
        from .tacc_explain import explain

        self._prepare(view)
        return explain(self, view)


class _Pass:
    """The state of one ``schedule`` pass (see the module docstring)."""

    def __init__(self, policy: Tacc, view: View) -> None:
        self.p, self.view, self.now = policy, view, view.now
        self.q: Quotas | None = view.quotas
        self.base = policy.maps.current(view.nodes)  # never changed by the pass
        self.free = self.base.copy()
        self.out: list[Action] = []
        self.runs, self.runs_model = policy.queue.runs, policy.queue.model  # ``expected_run``'s cache (``backfill_ok``)
        self.preempted: set[int] = set()
        self.victims: list[tuple[Rank, TaskView]] | None = None
        self.held_u: dict[str, int] = {}
        self.held_g: dict[str, int] = {}
        if self.q is not None:
            for t in view.running.values():
                self.held_u[t.owner] = self.held_u.get(t.owner, 0) + t.gpus
                self.held_g[t.group] = self.held_g.get(t.group, 0) + t.gpus
        self.reclaim = self.q is not None and any(lim.guaranteed_gpus > 0 for lim in (
            *self.q.groups.values(), self.q.default_group))
        # the running tasks' ends (``running_end``), taken in order as far as a pass reads them: those made so far,
        # the overdue ones still to take (a heap by id), where ``Running.ends`` goes on, the tasks left out
        self.ends: list[tuple[float, int, TaskView]] = []
        self.ends_over: list[tuple[int, TaskView]] | None = None
        self.ends_base: list[tuple[float, int, TaskView]] = []
        self.ends_next = 0
        self.ends_skip: set[int] = set()
        self.waits: dict[tuple[int, int, bool, int], float] = {}  # packed_wait per shape and actions so far
        self.fits: dict[Shape, _Fit | None] = {}  # fit per shape, for map generation fits_gen
        self.fits_gen = -1
        # preemption searches that failed (the best level each failed at), for map generation nogo_gen
        self.nogo: dict[tuple[object, ...], tuple[int, int, int]] = {}
        self.bounds: dict[tuple[object, ...], dict[str, int] | None] = {}  # ``_could_pack`` counts, same gen
        self.extras: dict[tuple[object, ...], dict[str, int]] = {}  # ``_bound_extra`` per level and preemptions
        self.nogo_gen = -1
        self.searches = 0  # preemption searches run in this pass (memo answers not counted)
        self.min_run_at = math.inf  # when the first victim passed over for being in its first ``min_run`` may go

    # -- quotas ----------------------------------------------------------------------------------

    def quota_blocks(self, t: TaskView) -> bool:
        q = self.q
        if q is None:
            return False
        if f"user:{t.owner}" in q.exhausted or f"group:{t.group}" in q.exhausted:
            return True
        cap = q.user(t.owner).max_gpus
        if cap is not None and self.held_u.get(t.owner, 0) + t.gpus > cap:
            return True
        cap = q.group(t.group).max_gpus
        return cap is not None and self.held_g.get(t.group, 0) + t.gpus > cap

    def below_guarantee(self, t: TaskView) -> bool:
        return self.reclaim and self.q is not None and \
            self.held_g.get(t.group, 0) + t.gpus <= self.q.group(t.group).guaranteed_gpus

    def spare(self, v: TaskView, lost: dict[str, int]) -> int:
        """GPUs ``v``'s group would hold above its guarantee once ``v`` is preempted too (< 0: below it)."""
        if self.q is None:
            return 0
        held = self.held_g.get(v.group, 0) - lost.get(v.group, 0) - v.gpus
        return held - self.q.group(v.group).guaranteed_gpus

    # -- the walk --------------------------------------------------------------------------------

    def run(self) -> list[Action]:
        p, free, _now = self.p, self.free, self.now
        # levels are compared as ints (``level_gt``): no tuple objects built per task walked
        worst = p.running.worst_level()
        w0, w1, w2 = worst if worst is not None else (0, 0, 0)
        head: tuple[Rank, TaskView] | None = None
        h0, h1, h2 = 0, 0, 0  # the head's level
        shadow: tuple[float, int] | None = None
        tested = 0
        failed: set[Shape] = set()
        pfail = 1 << 30  # the fewest GPUs a flexible task failed to get by preemption in this pass
        prev: TaskView | None = None  # the task walked last, and its level
        p0, p1, p2 = 0, 0, 0
        left: tuple[int, int, int] | None = None  # the best level walked that did not start
        quotas, reclaim, max_bf = self.q is not None, self.reclaim, p.max_backfill_test
        for rank, t in p.queue.ranked(self.view):
            r0, r1, r2 = rank[0], rank[1], rank[2]
            if left is None and prev is not None and not self._started(prev.id):
                left = (p0, p1, p2)
            prev = t
            p0, p1, p2 = r0, r1, r2
            # level_gt(w0, w1, w2, r0, r1, r2), written inline (a call per task walked costs, as Python)
            can_preempt = worst is not None and (w0 > r0 if w0 != r0 else w1 > r1 if w1 != r1 else w2 > r2)
            if free.total == 0 and (self.searches >= p.max_preempt_test or (
                    (not can_preempt or pfail <= 1) and not reclaim)):
                break  # nothing free, and nobody below can (or may, in this pass) preempt: victims only shrink
            if head is not None:
                tested += 1
                if tested > max_bf:
                    break
                if not can_preempt and not reclaim and (t.gpus > free.total or t.shape in failed):
                    continue  # no room and no victim: it cannot start (most candidates; the same as below, sooner)
            if quotas and self.quota_blocks(t):
                continue
            bf_ok, bf_shadow, below = True, shadow, False
            if head is not None:  # checked before any placement work: most candidates fail it
                if shadow is None:
                    shadow = bf_shadow = self.reserve(head[1])
                # a preemptible task ranked below the head may backfill anyway: the head can take it back
                below = t.preemptible and (r0 > h0 if r0 != h0 else r1 > h1 if r1 != h1 else r2 > h2)
                if not below:
                    bf_ok, bf_shadow = self.backfill_ok(t, shadow)
                    if not bf_ok and not can_preempt and not (reclaim and self.below_guarantee(t)):
                        continue
            shape = t.shape
            fit: _Fit | None = None
            # planned even when backfill forbids a start on free GPUs: a packed fit on free GPUs then needs no
            # preemption search (it would find no victim it needs)
            tried = t.gpus <= free.total and shape not in failed
            if tried:
                if free.gen == self.fits_gen and shape in self.fits:  # (``fit``'s cache, looked up inline)
                    fit = self.fits[shape]
                else:
                    fit = self.fit(t)
            note = ""
            taken: list[TaskView] = []
            if fit is None or fit.spread:
                try_it = can_preempt or (reclaim and self.below_guarantee(t))
                if try_it and fit is None and t.flexible and t.gpus >= pfail and not self.reclaim:
                    try_it = False  # a smaller task of a better level already found no victims
                lv = (r0, r1, r2)
                packed = self.preempt_for(t, lv, fit is None) if try_it else None
                if try_it and packed is None and fit is None and t.flexible:
                    pfail = min(pfail, t.gpus)
                if packed is not None:
                    fit, taken = packed
                    note = f"preempted {len(taken)} lower-ranked task(s)"
                    if any(not self._outranks(lv, v) for v in taken):
                        note = f"reclaimed guaranteed GPUs of group {t.group} from {len(taken)} task(s)"
            if head is not None and not taken and not bf_ok:
                if fit is None and tried:
                    failed.add(shape)
                continue
            if fit is not None and not taken and fit.spread:
                spread_note = self.spread_or_wait(t, fit)
                if spread_note is None:
                    continue  # waits for a packed placement (cheaper than the slowdown)
                note = spread_note
            if fit is None:
                if tried:
                    failed.add(shape)
                if head is None:
                    head, h0, h1, h2 = (rank, t), r0, r1, r2
                continue
            if head is not None and not taken:  # (backfill allowed it: checked above)
                shadow = bf_shadow
                note = note or "backfilled: does not delay the head's reserved start"
                if below and p.take_back:
                    p.unshielded.add(t.id)
            if taken:
                pfail = 1 << 30
            for v in taken:
                self.out.append(Preempt(v.id))
                self.preempted.add(v.id)
                self._hold(v, -1)
            free.take(fit.placement)
            self._hold(t, +1)
            failed.clear()
            self.out.append(Start(t.id, fit.placement, note or _packed_note(fit)))
        if left is None and prev is not None and not self._started(prev.id):
            left = (p0, p1, p2)  # (the walk stopped at it, or it was the last)
        self._wake(left)
        return self.out

    def _started(self, tid: int) -> bool:
        """Whether the walk started ``tid`` (its Start, if any, is the last action of its step)."""
        out = self.out
        return bool(out) and isinstance(out[-1], Start) and out[-1].task_id == tid

    def _outranks(self, lv: tuple[int, int, int], v: TaskView) -> bool:
        r = self.p.running.rank.get(v.id)
        return r is not None and level_gt(r[1][0], r[1][1], r[1][2], lv[0], lv[1], lv[2])

    def _hold(self, t: TaskView, sign: int) -> None:
        if self.q is not None:
            self.held_u[t.owner] = self.held_u.get(t.owner, 0) + sign * t.gpus
            self.held_g[t.group] = self.held_g.get(t.group, 0) + sign * t.gpus

    def fit(self, t: TaskView) -> _Fit | None:
        """``t``'s placement in the pass's map now; cached per shape until the map changes."""
        free = self.free
        if free.gen != self.fits_gen:
            self.fits.clear()
            self.fits_gen = free.gen
        key = t.shape
        try:
            return self.fits[key]
        except KeyError:
            pass
        plan = free.plan(t.nodes, t.gpus_per_node, t.flexible)
        fit = None if plan is None else _Fit(free, plan)
        if fit is not None and not t.spread_ok and fit.spread and fit.switches() > 1:
            fit = None
        self.fits[key] = fit
        return fit

    def preempt_for(self, t: TaskView, lv: tuple[int, int, int],
                    allow_spread: bool) -> tuple[_Fit, list[TaskView]] | None:
        """Victims (worst first) that make ``t`` fit, packed (or spread if ``allow_spread``); None: nobody is touched.

        Victims are tried worst first until a packed placement appears; those whose
        GPUs the placement does not use are given back (not preempted).
        """
        if self.victims is None:
            self.victims = self.p.running.victims(self.view, self.preempted)
        reclaim = self.reclaim and self.below_guarantee(t)
        free = self.free
        gen0 = free.gen
        # the search depends only on these and the map, with the GPUs held per group (both change only with an
        # action, which changes the map's generation); a failed search leaves the map as it was
        # A search that failed for a level fails for every worse one too (fewer victims rank below it).
        memo = (t.shape, allow_spread, reclaim, t.group if self.reclaim else None)
        if self.nogo_gen != gen0:
            self.nogo.clear()
            self.bounds.clear()
            self.nogo_gen = gen0
        failed_at = self.nogo.get(memo)
        l0, l1, l2 = lv
        if failed_at is not None and not level_gt(failed_at[0], failed_at[1], failed_at[2], l0, l1, l2):
            return None  # (lv >= failed_at)
        if not self._could_pack(t, lv, reclaim, allow_spread):  # not even with every possible victim
            self.nogo[memo] = lv if failed_at is None else min(lv, failed_at)
            return None
        if self.searches >= self.p.max_preempt_test:
            return None
        self.searches += 1
        saved: dict[str, list[int]] = {}  # free lists before the first give, to put back as they were
        total0 = free.total
        taken: list[TaskView] = []
        fit: _Fit | None = None
        lost: dict[str, int] = {}  # GPUs taken from each group in this search
        fresh_at = math.inf  # when the first victim passed over for its ``min_run`` may go
        nodes, per, flex = t.nodes, t.gpus_per_node, t.flexible  # (the shape, passed as is: native calls)
        # packed now: then packed after any give; else only the switches a give touches can change that
        already = free.packed(nodes, per, flex)
        for r, v in self.victims:
            if v.id in self.preempted or v.placement is None:
                continue
            spare = self.spare(v, lost)
            if not (level_gt(r[0], r[1], r[2], l0, l1, l2) or (reclaim and v.group != t.group and spare >= 0)):
                if not reclaim:
                    break  # worst first: nobody further down can be preempted by rank either
                continue
            if self.reclaim and v.group != t.group and spare < 0:
                continue  # within its group's guarantee: not taken by another group (no reclaim ping-pong)
            if v.start is not None and self.now - v.start < self.p.min_run and v.id not in self.p.unshielded:
                fresh_at = min(fresh_at, v.start + self.p.min_run)
                continue  # a fresh run is not cut short (no ping-pong paying restarts)
            if len(taken) >= self.p.max_victims:
                break  # bounds a search: victims come worst first, scattered
            for sl in v.placement.nodes:
                if sl.node not in saved and sl.node in free.free:
                    saved[sl.node] = free.free[sl.node]
            free.give(v.placement)
            taken.append(v)
            lost[v.group] = lost.get(v.group, 0) + v.gpus
            if already or free.packed_after_give(v.placement, nodes, per, flex):  # as fit() not spread, unbuilt
                fit = self.fit(t)
                break
        if fit is None and taken and t.gpus <= free.total:
            fit = self.fit(t)  # the best (spread) placement once every victim tried is given back
        if fit is None or not taken or (fit.spread and not allow_spread):
            free.free.update(saved)  # every victim taken back: the map is as it was (give builds new lists)
            free.total = total0
            free.gen = gen0  # fits planned before stay valid
            self.nogo[memo] = lv if failed_at is None else min(lv, failed_at)
            self.min_run_at = min(self.min_run_at, fresh_at)  # failed: it may succeed once that victim may go
            return None
        used = {(s.node, g) for s in fit.placement.nodes for g in s.gpus}
        needed = []
        for v in taken:
            assert v.placement is not None
            if any((s.node, g) in used for s in v.placement.nodes for g in s.gpus):
                needed.append(v)
            else:
                free.take(v.placement)  # disjoint from the placement: it keeps running
        return fit, needed

    def _could_pack(self, t: TaskView, lv: tuple[int, int, int], reclaim: bool, allow_spread: bool) -> bool:
        """An upper bound for ``preempt_for``: could ``t`` fit if every victim it might take were gone?

        Victims as the search admits them, less its group-guarantee checks (so never fewer)."""
        assert self.victims is not None
        key = (lv, reclaim, t.group if reclaim else None)  # the map's generation is nogo_gen: cleared with it
        counts = self.bounds.get(key)
        if counts is None:
            counts = self.bounds[key] = self._bound_counts(t, lv, reclaim)
        if counts is None:
            return False
        return self.free.could_fit(counts, t.nodes, t.gpus_per_node, t.flexible, packed=not allow_spread,
                                   one_switch=not t.spread_ok)

    def _bound_counts(self, t: TaskView, lv: tuple[int, int, int], reclaim: bool) -> dict[str, int] | None:
        key = (lv, reclaim, t.group if reclaim else None, len(self.preempted))
        extra = self.extras.get(key)
        if extra is None:
            extra = self.extras[key] = self._bound_extra(t, lv, reclaim)
        return self.free.counts_with(extra) if extra else None

    def _bound_extra(self, t: TaskView, lv: tuple[int, int, int], reclaim: bool) -> dict[str, int]:
        """GPUs per node of the victims ``_could_pack`` counts (they depend on the victims, not on the map)."""
        if not reclaim and not self.p.unshielded:  # by rank alone, young runs spared: kept per level by ``Running``
            return self.p.running.gpus_above(lv, self.preempted)
        return self._walk_extra(t, lv, reclaim)

    def _walk_extra(self, t: TaskView, lv: tuple[int, int, int], reclaim: bool) -> dict[str, int]:
        """``_bound_extra`` by walking the victims (any case; ``Running.gpus_above`` answers the common one)."""
        assert self.victims is not None
        extra: dict[str, int] = {}
        get = extra.get
        now, min_run, preempted, unshielded = self.now, self.p.min_run, self.preempted, self.p.unshielded
        l0, l1, l2 = lv
        for r, v in self.victims:
            if not (level_gt(r[0], r[1], r[2], l0, l1, l2) or (reclaim and v.group != t.group)):
                if not reclaim:
                    break
                continue
            if v.placement is None or (preempted and v.id in preempted):
                continue
            if v.start is not None and now - v.start < min_run and v.id not in unshielded:
                continue
            for sl in v.placement.nodes:
                extra[sl.node] = get(sl.node, 0) + len(sl.gpus)
        return extra

    # -- spread or wait --------------------------------------------------------------------------

    def running_end(self, i: int) -> tuple[float, int, TaskView] | None:
        """The ``i``-th of ``sorted((max(now, end), id, view))`` over the running tasks not preempted when the pass
        first asked (None past the last): made on demand from ``Running``'s sorted ends, without copying them (a
        pass reads the first few)."""
        ends = self.ends
        if i < len(ends):
            return ends[i]
        over = self.ends_over
        if over is None:
            now, base = self.now, self.p.running.ends()
            k = bisect.bisect_right(base, (now, math.inf))  # (end, id, view) <= (now, inf): ended by now (ids < inf)
            over = self.ends_over = [(tid, t) for _, tid, t in base[:k]]  # overdue: they end "now", by id
            heapq.heapify(over)
            self.ends_base, self.ends_next = base, k
            self.ends_skip = set(self.preempted)
        skip, base = self.ends_skip, self.ends_base
        while i >= len(ends):
            if over:
                tid, t = heapq.heappop(over)
                if tid not in skip:
                    ends.append((self.now, tid, t))
            elif self.ends_next < len(base):
                e = base[self.ends_next]
                self.ends_next += 1
                if e[1] not in skip:
                    ends.append(e)
            else:
                return None
        return ends[i]

    def spread_or_wait(self, t: TaskView, fit: _Fit) -> str | None:
        """The note of a spread start, or None when waiting for a packed placement is cheaper."""
        factor = fit.factor if fit.factor is not None else self.spread_factor(t, fit)
        where = fit.where
        if factor <= 1.0 or not self.p.spread_wait:
            return f"spread over {where}: no slowdown expected" if factor <= 1.0 else f"spread over {where}"
        cost = self.p.queue.expected_run(t) * (factor - 1.0)
        wait = self.packed_wait(t)
        if wait < cost:
            return None
        return (f"spread over {where}: waiting ~{_h(wait)} for a packed placement would cost more "
                f"than the ~{_h(cost)} slowdown (x{factor:.2f})")

    def spread_factor(self, t: TaskView, fit: _Fit) -> float:
        """The slowdown of ``fit`` (spread), kept on it: the same for every task of this shape on this map."""
        nodes = len(fit.counts)
        least = min_nodes(t.gpus, self.free.node_size)
        sw = fit.switches()
        factor = fit.factor = self.p.slowdown(t.gpus, nodes, least, sw)
        fit.where = f"{nodes} nodes" + (f", {sw} switches over TCP" if sw > 1 else "")
        return factor

    def packed_wait(self, t: TaskView) -> float:
        """Seconds until a packed placement for ``t`` should be free (running tasks end when expected)."""
        shape = (t.nodes, t.gpus_per_node, t.flexible, len(self.out))
        hit = self.waits.get(shape)
        if hit is None:
            hit = self.waits[shape] = self._packed_wait(t)
        return hit

    def _packed_wait(self, t: TaskView) -> float:
        sim = FreeCounts(self.free)  # the pass's map: the view's free slots with this pass's actions applied
        nodes, per, flex = t.nodes, t.gpus_per_node, t.flexible
        already = sim.packed(nodes, per, flex)  # then packed after the first give too (more free GPUs never unpack)
        for k in range(32):  # bounds the work; past the 32 next ends the estimate is "long" anyway
            e = self.running_end(k)
            if e is None:
                break
            end, _, v = e
            if v.placement is None or v.id in self.preempted:
                continue
            slots = self.p.running.slots[v.id]
            sim.give(slots)
            if already or sim.packed_after_give(slots, nodes, per, flex):
                return max(0.0, end - self.now)
        return math.inf

    # -- backfill --------------------------------------------------------------------------------

    def reserve(self, head: TaskView) -> tuple[float, int]:
        """The head's reserved start (shadow time) and the GPUs it leaves spare then."""
        avail = self.free.total
        if avail >= head.gpus:
            return self.now, avail - head.gpus
        q = self.p.queue
        need = head.gpus
        started = sorted([(self.now + q.expected_run(self.view.waiting[a.task_id]), self.view.waiting[a.task_id].gpus)
                          for a in self.out if isinstance(a, Start)])
        # the running tasks' ends (sorted already) merged with the started ones' as ``heapq.merge`` would
        # (by (end, GPUs), a tie to the running one), in one loop without generators (a hot path)
        i, n, j = 0, len(started), 0
        while (e := self.running_end(j)) is not None:
            j += 1
            end, _, v = e
            gpus = v.gpus
            while i < n and started[i] < (end, gpus):
                avail += started[i][1]
                if avail >= need:
                    return started[i][0], avail - need
                i += 1
            avail += gpus
            if avail >= need:
                return end, avail - need
        while i < n:
            avail += started[i][1]
            if avail >= need:
                return started[i][0], avail - need
            i += 1
        return math.inf, 0

    def backfill_ok(self, t: TaskView, shadow: tuple[float, int]) -> tuple[bool, tuple[float, int]]:
        """Whether ``t`` may start without delaying the head's reserved start, and the reservation after it
        (for a task not both preemptible and ranked below the head: such a one may always start)."""
        at, extra = shadow
        hit = self.runs.get(t.id)  # (``Queue.expected_run``'s cache, looked up inline: most candidates come here)
        run = hit[2] if hit is not None and hit[0] is t and hit[1] is self.runs_model else self.p.queue.expected_run(t)
        if self.now + run <= at:
            return True, shadow
        if t.gpus <= extra:
            return True, (at, extra - t.gpus)
        return False, shadow

    # -- wake-ups --------------------------------------------------------------------------------

    def _wake(self, left: tuple[int, int, int] | None) -> None:
        """A wake-up at the next time a waiting task's chances change without any event: a task rises a
        level by aging, a running one becomes a possible victim of the best level left (any level change, with
        guarantees to reclaim), or a victim passed over for its ``min_run`` becomes fair game."""
        started = sum(1 for a in self.out if isinstance(a, Start))
        if started >= len(self.view.waiting):
            return
        change = self.p.running.next_change(None if self.reclaim or left is None else left, self.now)
        at = [x for x in (self.p.queue.next_rise(), change, self.min_run_at) if x is not None and x < math.inf]
        nxt = min((x for x in at if x > self.now), default=None)
        if nxt is not None:
            self.out.append(Wake(max(nxt, self.now + self.p.wake_gap)))


class _Fit:
    """``FreeMap.fit``'s answer with the placement built on first use (most fits tried in a pass start nothing).

    Valid while the pass's map is unchanged since the plan (the placement is built from its free lists)."""

    __slots__ = ("_placement", "counts", "factor", "free", "gen", "spread", "where")

    def __init__(self, free: FreeMap, plan: Plan) -> None:
        self.free, self.gen = free, free.gen
        self.counts, self.spread = plan
        self._placement: Placement | None = None
        self.factor: float | None = None  # the spread's slowdown (``spread_or_wait``), computed on first use
        self.where = ""

    @property
    def placement(self) -> Placement:
        if self._placement is None:
            if self.free.gen != self.gen:
                raise RuntimeError("a placement planned on a map that changed since")
            self._placement = self.free.build((self.counts, self.spread)).placement
        return self._placement

    def switches(self) -> int:
        """How many switches the placement spans (``topology.switches_of``)."""
        sw = self.free.switch
        return len({sw.get(n, "") for n, _ in self.counts})


def _packed_note(fit: _Fit) -> str:
    n = len(fit.placement.nodes)
    return "packed on one node" if n == 1 else f"packed on {n} nodes of one switch"


def _h(seconds: float) -> str:
    if seconds == math.inf:
        return "forever"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"
