"""Running tasks as ``tacc`` sees them: ranks kept current cheaply, expected ends, victims.

A running task's rank changes only when its attained service crosses into an
age bucket of another level (``tacc_model``), when the duration model is rebuilt or when fair
share is recomputed (``Queue.epoch``). ``Running`` caches each rank with the
time it stays valid, in a heap, and counts preemptible tasks per preemption
level, so "could the best waiting task preempt anybody?" costs a few dict
reads per pass instead of a walk over every running task; likewise the GPUs per
node those tasks hold, per level, once they are ``min_run`` old (``gpus_above``:
what the preemption bound of a pass needs).

Invariants: after ``sync(view)`` every task of ``view.running`` has its current
rank (as ``Queue.rank`` would give at ``view.now``) and the level counts and GPUs
per level match the preemptible ones (property-tested against a walk); nothing here
mutates the view. With ``view.changes``
following the view synced last, only the tasks it names are looked at.
"""

from __future__ import annotations

import bisect
import heapq
import math
from itertools import compress
from operator import is_not

from ..history import BUCKETS, lower
from ..policy import TaskView, View
from ..topology import slot_counts
from .tacc_model import age_bucket
from .tacc_queue import Queue, Rank, level_gt

Level = tuple[int, int, int]
NO_LEVEL: Level = (-1, -1, -1)  # better than any: a change of a non-preemptible task never makes a victim


class Running:
    def __init__(self, min_run: float = 0.0) -> None:
        self.min_run = min_run  # a run this young is no victim (``Tacc.min_run``)
        # GPUs per node of the preemptible runs at least ``min_run`` old, per level (``gpus_above``); a younger
        # one waits in ``young`` ((start, id) heap, ``young_at``: id -> start) until it is that old (``_mature``)
        self.lv_nodes: dict[Level, dict[str, int]] = {}
        self.counted: dict[int, tuple[Level, tuple[tuple[str, int], ...]]] = {}
        self.young: list[tuple[float, int]] = []
        self.young_at: dict[int, float] = {}
        self.rank: dict[int, tuple[TaskView, Rank]] = {}
        self.end: dict[int, float] = {}  # expected end, as estimated when its rank was last computed
        self.views: dict[int, TaskView] = {}  # the last view object seen per running task
        self.slots: dict[int, tuple[tuple[str, int], ...]] = {}  # per running task: its placement's (node, GPUs)
        self.levels: dict[Level, int] = {}  # preemptible running tasks per level
        # (when its rank may change, id, start of that run, its level then: NO_LEVEL if not preemptible)
        self.changes: list[tuple[float, int, float, Level]] = []
        # the same changes of preemptible tasks, one heap per level then: "the next change that makes a task
        # worse than level L" is the earliest top among the levels worse than L (a few) (``next_change``)
        self.by_level: dict[Level, list[tuple[float, int, float]]] = {}
        self._vic: list[tuple[Rank, TaskView]] = []  # preemptible ones, best first, kept sorted
        self.epoch = -1
        self._victims: list[tuple[Rank, TaskView]] | None = None  # preemptible ones, worst first (None: stale)
        self._ends: list[tuple[float, int, TaskView]] | None = None  # (expected end, id, view), sorted
        self.fresh = False  # the last sync met fresh views of unchanged runs
        self.serial: int | None = None  # ``View.changes.serial`` of the view last synced with

    def _add(self, t: TaskView, queue: Queue, now: float, bulk: bool = False) -> None:
        """Rank and count one running task. ``bulk`` (a reset): append to the sorted lists and heaps, for
        ``_order`` to sort and heapify once (same contents, same order: every entry is unique)."""
        self._victims = None
        r = queue.rank(t, now)
        self.rank[t.id] = (t, r)
        self.views[t.id] = t
        end = self.end[t.id] = expected_end(t, queue, now)
        if t.placement is not None:
            self.slots[t.id] = slot_counts(t.placement)
        if self._ends is not None:  # kept sorted as tasks come and go (rebuilt only after a full reset)
            bisect.insort(self._ends, (end, t.id, t))
        if t.preemptible:
            lv: Level = (r[0], r[1], r[2])  # (not r[:3]: compiled, a slice builds the whole rank first)
            self.levels[lv] = self.levels.get(lv, 0) + 1
            if bulk:
                self._vic.append((r, t))
            else:
                bisect.insort(self._vic, (r, t))  # ranks are unique (they end with the id): views never compared
            if t.placement is not None:
                if t.start is not None and now - t.start < self.min_run:
                    self.young_at[t.id] = t.start
                    if bulk:
                        self.young.append((t.start, t.id))
                    else:
                        heapq.heappush(self.young, (t.start, t.id))
                else:
                    self._count(t.id, lv)
        if r[0] == 1 and t.start is not None and t.rate > 0:
            nxt = queue.curve(t).next_level[age_bucket(t.done_at(now))]
            at = t.start + (lower(nxt) - t.done) / t.rate if nxt < BUCKETS else math.inf
            if at < math.inf:
                then = (1, r[1], queue.base_level(t, lower(nxt)) - queue.tier(t, now)
                        + queue.shift.get((t.group, t.owner), 0)) if t.preemptible else NO_LEVEL
                at = max(at, now + 1.0)  # no float-edge spin
                if bulk:
                    self.changes.append((at, t.id, t.start, then))
                    if then != NO_LEVEL:
                        self.by_level.setdefault(then, []).append((at, t.id, t.start))
                else:
                    heapq.heappush(self.changes, (at, t.id, t.start, then))
                    if then != NO_LEVEL:
                        heapq.heappush(self.by_level.setdefault(then, []), (at, t.id, t.start))

    def _order(self) -> None:
        """After ``_add``s in bulk: sort the victims, heapify the heaps."""
        self._vic.sort()
        heapq.heapify(self.young)
        heapq.heapify(self.changes)
        for h in self.by_level.values():
            heapq.heapify(h)

    def _drop(self, tid: int) -> None:
        self._victims = None
        t, r = self.rank.pop(tid)
        end = self.end.pop(tid, None)
        view = self.views.pop(tid, None)
        self.slots.pop(tid, None)
        ends = self._ends
        if ends is not None:
            i = bisect.bisect_left(ends, (end, tid)) if end is not None else len(ends)
            if i < len(ends) and ends[i][1] == tid and ends[i][2] is view:
                del ends[i]
            else:
                self._ends = None  # not where expected: rebuild on next use
        if t.preemptible:
            if tid in self.counted:
                self._uncount(tid)
            else:
                self.young_at.pop(tid, None)
            vic = self._vic
            i = bisect.bisect_left(vic, (r,))
            if i < len(vic) and vic[i][0] == r:
                del vic[i]
            lv = (r[0], r[1], r[2])
            n = self.levels[lv] - 1
            if n:
                self.levels[lv] = n
            else:
                del self.levels[lv]

    def sync(self, view: View, queue: Queue) -> None:
        running, now, ch, serial = view.running, view.now, view.changes, self.serial
        self.serial = None if ch is None else ch.serial
        if self.epoch != queue.epoch:
            self.epoch = queue.epoch
            self._victims = self._ends = None
            self.rank.clear()
            self.end.clear()
            self.views.clear()
            self.slots.clear()
            self.levels.clear()
            self.changes.clear()
            self.by_level.clear()
            self._vic.clear()
            self.lv_nodes.clear()
            self.counted.clear()
            self.young.clear()
            self.young_at.clear()
            for t in running.values():
                self._add(t, queue, now, bulk=True)
            self._order()
            return
        rank = self.rank
        views = self.views
        told = ch is not None and ch.since == serial and not self.fresh
        if told:  # the caller says which tasks changed: sync just those
            assert ch is not None
            for tid in ch.running:
                nv = running.get(tid)
                cur = rank.get(tid)
                if nv is None:
                    if cur is not None:
                        self._drop(tid)
                elif cur is None:
                    self._add(nv, queue, now)
                elif views[tid] is not nv:
                    if (cur[0].start, cur[0].done, cur[0].rate) != (nv.start, nv.done, nv.rate):
                        self._drop(tid)
                        self._add(nv, queue, now)
                    else:
                        views[tid] = nv
                        self._ends = None
            told = len(rank) == len(running)  # (else the caller left something out: compare all)
        # the same view objects as last pass (compared in C, identities first): nothing changed
        if not told and (self.fresh or len(views) != len(running) or views != running):
            self.fresh = False
            if len(rank) != len(running) or rank.keys() != running.keys():
                for tid in rank.keys() - running.keys():
                    self._drop(tid)
            # new tasks, and runs that changed (a caller may build fresh views each pass), found in C
            for tid in compress(running.keys(), map(is_not, map(views.get, running.keys()), running.values())):
                t = running[tid]
                cur = rank.get(tid)
                if cur is None:
                    self._add(t, queue, now)
                elif (cur[0].start, cur[0].done, cur[0].rate) != (t.start, t.done, t.rate):
                    self._drop(tid)
                    self._add(t, queue, now)
                else:
                    views[tid] = t  # the same run, a fresh object: remember it, so the next pass skips it
                    self._ends = None
                    self.fresh = True  # fresh views: skip the (then costly) equality test next pass
        heap = self.changes
        while heap and heap[0][0] <= now:
            _, tid, start, _ = heapq.heappop(heap)
            cur = rank.get(tid)
            if cur is not None and cur[0].start == start:
                t = cur[0]
                self._drop(tid)
                self._add(t, queue, now)
        if len(heap) > 4 * len(running) + 100:
            self.changes = [e for e in heap if e[1] in rank and rank[e[1]][0].start == e[2]]
            heapq.heapify(self.changes)
            self.by_level = {}
            for at, tid, start, then in self.changes:
                if then != NO_LEVEL:
                    self.by_level.setdefault(then, []).append((at, tid, start))
            for h in self.by_level.values():
                heapq.heapify(h)
        self._mature(now)

    def _count(self, tid: int, lv: Level) -> None:
        pairs = self.slots[tid]
        d = self.lv_nodes.get(lv)
        if d is None:
            d = self.lv_nodes[lv] = {}
        for n, g in pairs:
            d[n] = d.get(n, 0) + g
        self.counted[tid] = (lv, pairs)

    def _uncount(self, tid: int) -> None:
        lv, pairs = self.counted.pop(tid)
        d = self.lv_nodes[lv]
        for n, g in pairs:
            left = d[n] - g
            if left:
                d[n] = left
            else:
                del d[n]
        if not d:
            del self.lv_nodes[lv]

    def _mature(self, now: float) -> None:
        """Count the young runs that are ``min_run`` old by ``now`` (the same test as the pass's)."""
        heap, young_at = self.young, self.young_at
        while heap and not now - heap[0][0] < self.min_run:
            start, tid = heapq.heappop(heap)
            if young_at.get(tid) == start:
                del young_at[tid]
                t, r = self.rank[tid]
                assert t.placement is not None
                self._count(tid, (r[0], r[1], r[2]))

    def gpus_above(self, lv: Level, preempted: set[int]) -> dict[str, int]:
        """GPUs per node of the preemptible runs of a level worse than ``lv``, at least ``min_run`` old as of
        the last sync, and not in ``preempted``: what the victims a task may take by rank hold."""
        out: dict[str, int] = {}
        get = out.get
        l0, l1, l2 = lv
        for level, d in self.lv_nodes.items():
            if level_gt(level[0], level[1], level[2], l0, l1, l2):
                for n, g in d.items():
                    out[n] = get(n, 0) + g
        for tid in preempted:
            c = self.counted.get(tid)
            if c is not None and level_gt(c[0][0], c[0][1], c[0][2], l0, l1, l2):
                for n, g in c[1]:
                    left = out[n] - g
                    if left:
                        out[n] = left
                    else:
                        del out[n]
        return out

    def worst_level(self) -> Level | None:
        """The worst level among preemptible running tasks (None: none)."""
        return max(self.levels) if self.levels else None

    def victims(self, view: View, preempted: set[int]) -> list[tuple[Rank, TaskView]]:
        """Preemptible running tasks not yet preempted, worst rank first."""
        out = self._victims
        if out is None:
            out = self._victims = self._vic[::-1]
        if preempted:
            return [e for e in out if e[1].id not in preempted]
        return out

    def ends(self) -> list[tuple[float, int, TaskView]]:
        """(expected end, id, view) of every running task (the last view seen), soonest first."""
        out = self._ends
        if out is None:
            end = self.end
            out = self._ends = sorted((end[tid], tid, t) for tid, t in self.views.items())
        return out

    def next_change(self, best: Level | None = None, now: float = -math.inf) -> float | None:
        """When the next running task changes level; with ``best`` (the best level left waiting), the next
        change that makes a preemptible task worse than ``best``: the earliest that task could preempt it."""
        heap = self.changes
        if best is None or not heap:
            return heap[0][0] if heap else None
        rank = self.rank
        first: float | None = None
        for lv in [lv for lv in self.by_level if lv > best]:
            h = self.by_level[lv]
            while h:  # drop entries of runs gone or changed, and changes already made
                at, tid, start = h[0]
                cur = rank.get(tid)
                if at > now and cur is not None and cur[0].start == start:
                    break
                heapq.heappop(h)
            if not h:
                del self.by_level[lv]
            elif first is None or h[0][0] < first:
                first = h[0][0]
        return first


def expected_end(t: TaskView, queue: Queue, now: float) -> float:
    """When a running task should end: its median remaining time given its attained service, capped by its limit."""
    done = t.done_at(now)
    model = queue.model
    left = queue.curve(t).median_left[age_bucket(done)] if model.version else max(1.0, t.predicted - done)
    if t.time_limit is not None and t.start is not None:
        return min(now + left / (t.rate or 1.0), max(now, t.start + t.time_limit))
    return now + left / (t.rate or 1.0)


def expected_run(t: TaskView, queue: Queue) -> float:
    """How long a waiting task should run: its expected remaining time (mean), capped by its limit."""
    model = queue.model
    left = queue.curve(t).mean_left[age_bucket(t.done)] if model.version else max(1.0, t.predicted - t.done)
    if t.time_limit is not None:
        left = min(left, max(1.0, t.time_limit - t.done))
    return left
