"""The ``tacc`` queue: who goes first, kept sorted across passes.

Rank of a task (smaller first), as a tuple ``(1, qos, level, submit, id)`` (the first
field is constant: levels compare as three ints, ``level_gt``):

1. *QoS class*: interactive, then normal, then low (unknown classes: normal).
2. *Level*: the level of the Gittins index of the task's attained service
   (``tacc_model``: shortest-expected first, learned from completed tasks),
   bounded by its time limit and per GPU, less one per ``age_step`` waited (aging:
   nothing waits forever, as an old task rises until it outranks every fresh one),
   plus a fair-share shift. A running task is preempted only for a task of a
   strictly better ``(qos, level)``, so tasks of one level never preempt each other.
3. Submit time (and id): FIFO inside a level; a preempted task keeps its place by age.

Fair share (Slurm's classic multifactor, with decay): each group's and user's
GPU-seconds, decayed with ``half_life``, recomputed every ``calc_period``; a
group using ``r`` times its equal share has its level shifted by
``round(fair_weight * log2(r))``, clamped to [-2, 2] (the same again for a user
inside its group): heavy users sink, light ones rise, but a short task of a
heavy group still passes a long one. Usage starts from ``View.history.past`` (what
the service's store says was used before it started), so a restart forgets nothing.

Context (``context_width`` > 0): a task's curve is that of ``group|gpus|class``, the
class being the run-time class (``context_width`` history buckets) of the longest
task of its batch seen to end ("n": none yet); a batch is the tasks of one group,
user and GPU count submitted less than ``batch_gap`` apart (jobs come in bursts of
alike jobs). The curves are learned from the ends the policy sees (``completed``), so
a restarted service starts from the groups' curves. A task that has not run moves to
its batch's class when a longer sibling ends; once it has run, its context is fixed.

Within one user, tasks go by the user's ``priority`` first (higher first), then by rank.

Invariants: waiting tasks are held in one sorted list per (group, user) whose order
does not depend on fair share (a shift moves a whole list: no re-sort), and, while no
task has a priority, in one list of them all (``flat``: no merge; rebuilt when fair
share moves ranks); lists are rebuilt only when the model changes. An entry holds the
exact ``TaskView`` it was made from and is removed (by bisection) when its task leaves,
comes back with new service or rises a level, so a walk meets only live entries. A
fresh view equal in every ranked field keeps its entry; a view whose ``changes``
follow the last one synced is synced from them alone (O(changes)).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterator, Mapping
from itertools import compress
from operator import is_not
from typing import Any

from ..history import DurationHistory, bucket
from ..policy import TaskView, View
from .tacc_model import Curve, Model, age_bucket

QOS_RANK = {"interactive": 0, "high": 0, "normal": 1, "low": 2}

Rank = tuple[int, int, int, float, int]  # (1, qos, level, submit, id)


def level_gt(a0: int, a1: int, a2: int, b0: int, b1: int, b2: int) -> bool:
    """``(a0, a1, a2) > (b0, b1, b2)``: whether level ``a`` is worse than ``b``. On ints, because compiled
    (``native``) a comparison of two fixed-length tuples builds both as objects first (hot loops use this)."""
    if a0 != b0:
        return a0 > b0
    if a1 != b1:
        return a1 > b1
    return a2 > b2


class Queue:
    """Sorted waiting tasks, fair-share factors and aging, for one policy instance."""

    def __init__(self, half_life: float, calc_period: float, fair_weight: float, level_ratio: float,
                 size_exponent: float, age_step: float = 0.0, context_width: int = 0,
                 batch_gap: float = 1800.0, probes: int = 0) -> None:
        self.half_life, self.calc_period, self.fair_weight = half_life, calc_period, fair_weight
        self.size_exponent = size_exponent
        self.age_step = age_step  # a waiting task rises one level per ``age_step`` seconds waited (0: never)
        self.age_heap: list[tuple[float, int, int, TaskView]] = []  # (when the task rises a level, id, seq, view)
        self.ratio = level_ratio
        self._log_ratio = math.log(level_ratio)
        self.model = Model.build(None, level_ratio)
        self.lists: dict[tuple[str, str], list[tuple[Any, int, int, TaskView]]] = {}
        self.seq = 0
        self.known: dict[int, TaskView] = {}
        self.entry: dict[int, tuple[Any, int, int, TaskView]] = {}  # the live list entry per task
        self.hint: list[int] = []  # tasks that probably left the queue since the last sync (started by the policy)
        self.fresh = False  # the last sync met fresh views equal to known ones
        self.runs: dict[int, tuple[TaskView, Model, float]] = {}  # expected_run per waiting task and model
        self.entries = 0
        self.usage_g: dict[str, float] = {}
        self.usage_u: dict[tuple[str, str], float] = {}
        self.shift: dict[tuple[str, str], int] = {}
        self.last_calc: float | None = None
        self.epoch = 0  # bumped whenever ranks of running tasks must be recomputed
        # every listed entry, as (rank, view), in one sorted list (None: not kept); kept only while no known task
        # has a priority (then each list is sorted by rank too, and ``ranked`` needs no merge)
        self.flat: list[tuple[Rank, TaskView]] | None = None
        self.prioritized = 0  # known tasks with a priority other than 0
        self.serial: int | None = None  # ``View.changes.serial`` of the view last synced with
        # context (see ``context``): per task its curve's key and its batch; per batch (tasks of one group, user
        # and GPU count submitted less than ``batch_gap`` apart) the run time of its last task seen to end and
        # its members not started yet; the policy's own histogram of completed run times per context, its model
        self.context_width, self.batch_gap = context_width, batch_gap
        # probes (``probes`` > 0): while none of a batch has been seen to end, only its first ``probes`` tasks
        # keep their level; the others wait one level lower (``base_level``), so a big batch of unknown length
        # is measured by a few of its tasks before the rest of it goes ahead of other users' fresh work
        self.probes = probes
        self.pos: dict[int, int] = {}  # per task with a batch: its place in the batch (0: the first)
        self.ctx: dict[int, str] = {}
        self.batch_of: dict[int, int] = {}
        self.last_submit: dict[tuple[str, str, int], tuple[float, int]] = {}
        self.batch_end: dict[int, int] = {}  # run-time class of the batch's last task seen to end
        self.members: dict[int, list[int]] = {}
        self.ctx_hist = DurationHistory()
        self.ctx_model = Model.build(None, level_ratio)

    # -- rank ------------------------------------------------------------------------------------

    def base_level(self, t: TaskView, done: float) -> int:
        """The task's level before fair share: its Gittins level, bounded by its time limit, per size."""
        lv = self.curve(t).level[age_bucket(done)]
        if t.time_limit is not None and t.time_limit > done:  # the limit bounds what is left
            lv = min(lv, int(math.log(t.time_limit - done) // self._log_ratio))
        if self.size_exponent and t.gpus > 1:
            lv += round(self.size_exponent * math.log(t.gpus) / self._log_ratio)
        if self.probes and t.start is None and done == 0 and self.pos.get(t.id, 0) >= self.probes:
            b = self.batch_of.get(t.id)
            if b is not None and b not in self.batch_end:
                lv += 1  # not a probe of a batch none of which has ended yet
        return lv

    def curve(self, t: TaskView) -> Curve:
        """The task's belief: its context's curve once the policy has seen completions, else its group's."""
        key = self.ctx.get(t.id)
        if key is None or not self.ctx_model.version:
            return self.model.of(t.group)
        return self.ctx_model.of(key)

    def context(self, t: TaskView) -> str:
        """The task's context: its group, GPU count and the run-time class (``context_width`` history buckets)
        of the last task of its batch seen to end ("n": none yet). Set when first seen; a task that has not run
        yet gets its batch's new class each time one of its batch ends (``completed``)."""
        key = (t.group, t.owner, t.gpus)
        last = self.last_submit.get(key)
        if last is not None and abs(t.submit - last[0]) <= self.batch_gap:
            b = last[1]
        else:
            b = t.id
        if last is None or t.submit >= last[0]:
            self.last_submit[key] = (t.submit, b)
        self.batch_of[t.id] = b
        self.members.setdefault(b, []).append(t.id)
        self.pos[t.id] = len(self.members[b]) - 1
        end = self.batch_end.get(b)
        return f"{t.group}|{t.gpus}|{'n' if end is None else end}"

    def completed(self, t: TaskView, ran: float, now: float) -> None:
        """A task the policy saw run has ended after ``ran`` seconds of work: learn, and move its batch's
        waiting tasks that have not run to their new context."""
        key = self.ctx.pop(t.id, None)
        b = self.batch_of.pop(t.id, None)
        if key is not None:
            self.ctx_hist.observe(key, ran)
        if b is None:
            return
        cls = bucket(ran) // self.context_width
        if self.batch_end.get(b, -1) >= cls:
            return  # its waiting tasks are in that context already (the batch's longest run sets it)
        self.batch_end[b] = cls
        new = f"{t.group}|{t.gpus}|{cls}"
        keep = []
        for tid in self.members.get(b, ()):
            w = self.known.get(tid)
            if w is None or w.done > 0 or tid not in self.batch_of:
                continue  # gone, or has run: its context stays
            keep.append(tid)
            if self.ctx.get(tid) != new and tid in self.entry:
                self.ctx[tid] = new
                if self.ctx_model.version or self.probes:  # (a new curve, or no probe penalty any more)
                    self._insert(w, now)
        if keep:
            self.members[b] = keep
        else:
            self.members.pop(b, None)

    def prune(self, live: Mapping[int, object]) -> None:
        """Forget the contexts and batches of tasks neither waiting nor running (cancelled, or their end unseen)."""
        for tid in [tid for tid in self.ctx if tid not in live]:
            del self.ctx[tid]
        for tid in [tid for tid in self.batch_of if tid not in live]:
            del self.batch_of[tid]
        for tid in [tid for tid in self.pos if tid not in live]:
            del self.pos[tid]
        alive = set(self.batch_of.values()) | {b for _, b in self.last_submit.values()}
        for d in (self.members, self.batch_end):
            for b in [b for b in d if b not in alive]:
                del d[b]

    def waited(self, t: TaskView, now: float) -> float:
        """Seconds spent waiting since submission (runs excluded); for a running task, before this run."""
        ran = t.attained / t.gpus if t.gpus else 0.0
        return (t.start if t.start is not None else now) - t.submit - ran

    def tier(self, t: TaskView, now: float) -> int:
        """Levels a task has risen by waiting (one per ``age_step``; for a running task, before this run)."""
        return int(self.waited(t, now) // self.age_step) if self.age_step > 0 else 0

    def rank(self, t: TaskView, now: float) -> Rank:
        """The rank of a task, waiting or running, at ``now``."""
        qos = QOS_RANK.get(t.qos, 1)
        level = self.base_level(t, t.done_at(now)) - self.tier(t, now)
        return (1, qos, level + self.shift.get((t.group, t.owner), 0), t.submit, t.id)

    # -- upkeep ----------------------------------------------------------------------------------

    def refresh(self, view: View, rebuild_growth: float) -> None:
        """Rebuild the model when history grew; fair share every ``calc_period``; sync with ``view.waiting``."""
        h = self.model
        hist = view.history
        if hist is not None and hist.version > 0 and (
                h.version == 0 or hist.version >= h.version * (1.0 + rebuild_growth) + 8):
            model = Model.build(hist, self.ratio)
            ctx_model = Model.build(self.ctx_hist, self.ratio) if self.context_width else self.ctx_model
            same = self._same_levels(model, ctx_model)
            self.model, self.ctx_model = model, ctx_model
            self._rebuild(view.waiting, view.now, reuse_keys=same)
        self._sync(view)
        if self.last_calc is None or view.now - self.last_calc >= self.calc_period:
            self._fair_share(view)

    def _same_levels(self, model: Model, ctx_model: Model) -> bool:
        """Whether the curves the known tasks are ranked by have the same levels under the new models: a rank
        reads a model only through ``curve(t).level``, so every listed task's key is then what it was."""
        if (ctx_model.version > 0) != (self.ctx_model.version > 0):
            return False  # tasks move between their group's curve and their context's
        for g in {g for g, _ in self.lists}:
            if model.of(g).level != self.model.of(g).level:
                return False
        if self.context_width and ctx_model.version:
            for key in set(self.ctx.values()):
                if ctx_model.of(key).level != self.ctx_model.of(key).level:
                    return False
        return True

    def _key(self, t: TaskView, now: float) -> tuple[int, int, int, float, int]:
        level = self.base_level(t, t.done) - self.tier(t, now)
        return (QOS_RANK.get(t.qos, 1), -t.priority, level, t.submit, t.id)

    def _flat_rank(self, e: tuple[Any, int, int, TaskView]) -> Rank:
        key, t = e[0], e[3]
        return (1, key[0], key[2] + self.shift.get((t.group, t.owner), 0), key[3], e[1])

    def _know(self, t: TaskView) -> None:
        old = self.known.get(t.id)
        if old is not None and old.priority:
            self.prioritized -= 1
        if t.priority:
            self.prioritized += 1
            self.flat = None
        self.known[t.id] = t

    def _unlist(self, tid: int) -> None:
        """Drop the task's entry from its list (so walks never meet stale ones)."""
        e = self.entry.pop(tid, None)
        if e is not None:
            t = e[3]
            lst = self.lists.get((t.group, t.owner))
            if lst is not None:
                i = bisect.bisect_left(lst, e)
                if i < len(lst) and lst[i][2] == e[2]:  # (seq: unique per entry; not ``is``: tuples may be copied)
                    del lst[i]
            flat = self.flat
            if flat is not None:
                i = bisect.bisect_left(flat, (self._flat_rank(e),))
                if i < len(flat) and flat[i][1] is t:
                    del flat[i]

    def _insert(self, t: TaskView, now: float) -> None:
        self._unlist(t.id)
        if self.context_width and t.id not in self.ctx:
            self.ctx[t.id] = self.context(t)
        lst = self.lists.setdefault((t.group, t.owner), [])
        self.seq += 1
        e = (self._key(t, now), t.id, self.seq, t)
        bisect.insort(lst, e)
        self.entry[t.id] = e
        self._know(t)
        if self.flat is not None:
            bisect.insort(self.flat, (self._flat_rank(e), t))
        self.entries += 1
        if self.age_step > 0:
            ran = t.attained / t.gpus if t.gpus else 0.0
            rise = t.submit + ran + (self.tier(t, now) + 1) * self.age_step
            if now < rise:  # (later than now: the rise loop in _sync ends)
                heapq.heappush(self.age_heap, (rise, t.id, self.seq, t))

    def _rebuild(self, waiting: Mapping[int, TaskView], now: float, reuse_keys: bool = False) -> None:
        """Re-sort the known tasks still waiting (new ones are inserted by ``_sync``). With ``reuse_keys`` (the
        new model moved no level: ``_same_levels``) a listed task keeps its key instead of having it computed
        again: the same lists, without ranking 10,000 waiting tasks (a few arrays' elements) anew, which took
        a pass from a few ms to over 100 ms."""
        old = [t for tid, t in self.known.items() if tid in waiting]
        self.lists.clear()
        self.known.clear()
        self.prioritized = 0
        prev = self.entry
        self.entry = {}
        self.entries = 0
        self.runs.clear()
        self.flat = None
        for t in old:
            self._know(t)
            self.entries += 1
            lst = self.lists.setdefault((t.group, t.owner), [])
            self.seq += 1
            was = prev.get(t.id) if reuse_keys else None
            e = (was[0] if was is not None and was[3] is t else self._key(t, now), t.id, self.seq, t)
            lst.append(e)
            self.entry[t.id] = e
        for lst in self.lists.values():
            lst.sort()
        self.epoch += 1

    def _sync(self, view: View) -> None:
        waiting, known, serial = view.waiting, self.known, self.serial
        for tid in self.hint:  # started last pass: most likely gone
            if tid in known and tid not in waiting:
                self._forget(tid)
        self.hint = []
        ch = view.changes
        self.serial = None if ch is None else ch.serial
        if ch is not None and ch.since == serial and not self.fresh:  # told what changed: sync just those
            for tid in ch.waiting:
                t = waiting.get(tid)
                seen = known.get(tid)
                if t is None:
                    if seen is not None:
                        self._forget(tid)
                elif seen is None or (seen is not t and _moved(seen, t)):
                    self._insert(t, view.now)
            if len(known) == len(waiting):  # (else the caller left something out: compare all below)
                self._rise(view.now)
                return
        if not self.fresh and len(waiting) > len(known):  # arrivals are usually appended: insert the new tail
            new = []
            tail = reversed(waiting) if isinstance(waiting, dict) else reversed(list(waiting))
            for tid in tail:
                if tid in known:
                    break
                new.append(tid)
            for tid in reversed(new):
                self._insert(waiting[tid], view.now)
        # unchanged (the same view objects: a C loop that compares identities first): nothing to do
        if len(known) != len(waiting) or self.fresh or known != waiting:
            self.fresh = False
            # new or changed views (a caller may build fresh views each pass: then compare values), found in C
            for tid in compress(waiting.keys(), map(is_not, map(known.get, waiting.keys()), waiting.values())):
                t = waiting[tid]
                seen = known.get(tid)
                if seen is None or _moved(seen, t):
                    self._insert(t, view.now)
                else:
                    self.fresh = True  # the caller builds fresh views: comparing them all costs, skip that next time
            # now every waiting task is known: the known ones not waiting are the extra ones
            if len(known) != len(waiting):
                for tid in known.keys() - waiting.keys():
                    self._forget(tid)
        self._rise(view.now)

    def _rise(self, now: float) -> None:
        """Move the tasks that rose a level by ``now``; drop lists of users gone."""
        known = self.known
        heap = self.age_heap
        while heap and heap[0][0] <= now:  # risen a level by waiting: its place in its list moves up
            _, tid, _, t = heapq.heappop(heap)
            if known.get(tid) is t and tid in self.entry:
                self._insert(t, now)
        # ``entries`` counts inserts since the last compaction (stale ones included): it only decides when
        # lists of (group, user) without waiting tasks are dropped (fair share walks the lists' keys)
        if self.entries > 2 * len(known) + 100:
            live = {(t.group, t.owner) for t in known.values()}
            for k in list(self.lists):
                if k not in live:
                    del self.lists[k]
            self.entries = len(known)

    def _forget(self, tid: int) -> None:
        if self.known.pop(tid).priority:
            self.prioritized -= 1
        self._unlist(tid)
        self.runs.pop(tid, None)

    def expected_run(self, t: TaskView) -> float:
        """``tacc_running.expected_run`` of a waiting task, cached per view and model."""
        hit = self.runs.get(t.id)
        if hit is not None and hit[0] is t and hit[1] is self.model:
            return hit[2]
        from .tacc_running import expected_run

        v = expected_run(t, self)
        self.runs[t.id] = (t, self.model, v)
        return v

    def next_rise(self) -> float | None:
        """When the next waiting task rises a level by aging (entries of tasks gone or changed are dropped here)."""
        heap, known, entry = self.age_heap, self.known, self.entry
        while heap and not (known.get(heap[0][1]) is heap[0][3] and heap[0][1] in entry):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _fair_share(self, view: View) -> None:
        now = view.now
        dt = 0.0 if self.last_calc is None else now - self.last_calc
        decay = 0.5 ** (dt / self.half_life)
        ug, uu = self.usage_g, self.usage_u
        hist = view.history
        if self.last_calc is None and hist is not None:  # usage from before a restart
            for at, usage in hist.past:
                seed = 0.5 ** (max(0.0, now - at) / self.half_life)
                for (g, u), used in usage.items():
                    ug[g] = ug.get(g, 0.0) + used * seed
                    uu[(g, u)] = uu.get((g, u), 0.0) + used * seed
        for g in ug:
            ug[g] *= decay
        for k in uu:
            uu[k] *= decay
        lo = now - dt
        for t in view.running.values():  # (the same sums in the same order; fewer lookups: a hot loop)
            since = max(t.start if t.start is not None else now, lo)
            used = t.gpus * (now - since)
            g = t.group
            ug[g] = ug.get(g, 0.0) + used
            k = (g, t.owner)
            uu[k] = uu.get(k, 0.0) + used
        for g, u in self.lists:  # every (group, user) with waiting tasks, without walking the queue
            ug.setdefault(g, 0.0)
            uu.setdefault((g, u), 0.0)
        self.last_calc = now
        total = sum(ug.values())
        users_of: dict[str, int] = {}
        for g, _ in uu:
            users_of[g] = users_of.get(g, 0) + 1
        w = self.fair_weight
        shift = {}
        groups = len(ug)
        shift_g: dict[str, int] = {}  # per group (the same for each of its users)
        for (g, u), used in uu.items():
            sg = shift_g.get(g)
            if sg is None:
                sg = shift_g[g] = _shift(w, ug[g] / total * groups) if total > 0 else 0
            su = _shift(w, used / ug[g] * users_of[g]) if ug[g] > 0 else 0
            if sg or su:
                shift[(g, u)] = sg + su
        if shift != self.shift:
            self.shift = shift
            self.epoch += 1
            self.flat = None  # ranks moved: rebuilt on the next walk

    # -- order -----------------------------------------------------------------------------------

    def ranked(self, view: View) -> Iterator[tuple[Rank, TaskView]]:
        """Every waiting task, best first, with its rank."""
        if not self.prioritized:  # every list is sorted by rank: one sorted list of them all, no merge
            flat = self.flat
            if flat is None:
                flat = self.flat = self._flat()
            yield from flat
            return
        gens = [self._walk(lst, self.shift.get(k, 0)) for k, lst in self.lists.items() if lst]
        if len(gens) == 1:
            yield from gens[0]
        else:
            yield from heapq.merge(*gens)  # ranks are unique (they end with the id): views are never compared

    def _flat(self) -> list[tuple[Rank, TaskView]]:
        """Every listed entry as (rank, view), sorted: ``_flat_rank`` of each, a list at a time (one shift per
        list; each list is sorted already, so the sort merges runs)."""
        out: list[tuple[Rank, TaskView]] = []
        shift = self.shift
        for k, lst in self.lists.items():
            sh = shift.get(k, 0)
            out.extend([((1, key[0], key[2] + sh, key[3], tid), t) for key, tid, _, t in lst])
        out.sort()
        return out

    @staticmethod
    def _walk(lst: list[tuple[Any, int, int, TaskView]], shift: int) -> Iterator[tuple[Rank, TaskView]]:
        # lists hold exactly the live entries (``_unlist``)
        for key, tid, _, t in lst:
            yield (1, key[0], key[2] + shift, key[3], tid), t


def _moved(a: TaskView, b: TaskView) -> bool:
    """Whether two views of one waiting task differ in anything its rank or placement depends on."""
    return (a.submit, a.done, a.attained, a.qos, a.priority, a.time_limit, a.group, a.owner, a.nodes,
            a.gpus_per_node, a.flexible, a.spread_ok, a.preemptible, a.predicted) != (
        b.submit, b.done, b.attained, b.qos, b.priority, b.time_limit, b.group, b.owner, b.nodes,
        b.gpus_per_node, b.flexible, b.spread_ok, b.preemptible, b.predicted)


def _shift(weight: float, r: float) -> int:
    """Levels to shift for using ``r`` times the equal share."""
    if not weight or r <= 0:
        return -2 if weight and r <= 0 else 0
    return max(-2, min(2, round(weight * math.log2(r))))
