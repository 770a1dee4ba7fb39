"""Slurm's multifactor priority with EASY backfill, as a baseline.

Priority (``priority/multifactor``) = ``w_age * age + w_fairshare * fs + w_size * size``:
- age: queue time / ``max_age``, capped at 1 (Slurm's PriorityMaxAge default: 7 days);
- fair share (classic): ``2 ** (-usage / shares)``, usage the group's GPU-seconds,
  decayed with a half-life (PriorityDecayHalfLife default: 7 days), as a fraction
  of all groups' usage; shares equal among the groups seen so far;
- size: GPUs / cluster GPUs (PriorityFavorSmall default NO: big jobs favoured).
Slurm's default weight is 0 for every factor (plain FIFO); the weights here
(age 1,000, fair share 10,000, size 1,000) are the usual site settings.
Usage and priorities are recomputed every ``calc_period`` (PriorityCalcPeriod
default: 5 minutes), from the running tasks in the views, as Slurm charges usage.

Scheduling: tasks in priority order start while they fit. The first that does
not fit (the head) gets a reservation at the earliest time enough GPUs free
up, if running tasks end when predicted (``predicted`` plays the time limit).
Later tasks, up to ``max_job_test`` of them (bf_max_job_test default 500), may
start now only if they fit and either end (by prediction) before that time, or
use only GPUs the head will not need then (EASY backfill: a backfilled task
never delays the head's reserved start, as far as predictions go).

Invariants: never preempts; a task is started only on free slots (``FreeMap``);
the reservation counts GPUs, not nodes (a placement-level reservation is
future work).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from typing import ClassVar

from ..policy import Action, Start, TaskView, View
from ..topology import FreeMap


class SlurmMultifactor:
    name: ClassVar[str] = "slurm"
    preemptive: ClassVar[bool] = False
    oracle: ClassVar[bool] = False

    def __init__(self, w_age: float = 1000.0, w_fairshare: float = 10000.0, w_size: float = 1000.0,
                 max_age: float = 7 * 86400.0, half_life: float = 7 * 86400.0, calc_period: float = 300.0,
                 max_job_test: int = 500) -> None:
        self.w_age, self.w_fairshare, self.w_size = w_age, w_fairshare, w_size
        self.max_age, self.half_life, self.calc_period = max_age, half_life, calc_period
        self.max_job_test = max_job_test
        self.usage: dict[str, float] = {}
        self.fairshare: dict[str, float] = {}
        self.last_calc: float | None = None
        self._order: list[tuple[float, float, int, int, float]] = []  # (-priority, submit, id, gpus, predicted)
        self._known: set[int] = set()  # ids in _order
        self._serial: int | None = None  # ``View.changes.serial`` of the view last synced with

    def _recalc(self, view: View) -> None:
        now = view.now
        if self.last_calc is not None and now - self.last_calc < self.calc_period:
            return
        dt = 0.0 if self.last_calc is None else now - self.last_calc
        decay = 0.5 ** (dt / self.half_life)
        for g in self.usage:
            self.usage[g] *= decay
        for t in view.running.values():
            since = max(t.start if t.start is not None else now, now - dt)
            self.usage[t.group] = self.usage.get(t.group, 0.0) + t.gpus * (now - since)
        for t in view.waiting.values():
            self.usage.setdefault(t.group, 0.0)
        total = sum(self.usage.values())
        share = 1.0 / max(1, len(self.usage))
        self.fairshare = {g: 2.0 ** (-(u / total) / share) if total > 0 else 1.0 for g, u in self.usage.items()}
        self.last_calc = now
        self._order.clear()
        self._known.clear()

    def priority(self, task: TaskView, now: float, cluster_gpus: int) -> float:
        age = min(1.0, max(0.0, now - task.submit) / self.max_age)
        fs = self.fairshare.get(task.group, 1.0)
        size = task.gpus / max(1, cluster_gpus)
        return self.w_age * age + self.w_fairshare * fs + self.w_size * size

    def _entry(self, t: TaskView, now: float, size_w: float) -> tuple[float, float, int, int, float]:
        age = now - t.submit
        age_f = 1.0 if age >= self.max_age else max(0.0, age) / self.max_age
        prio = self.w_age * age_f + self.w_fairshare * self.fairshare.get(t.group, 1.0) + size_w * t.gpus
        return (-prio, t.submit, t.id, t.gpus, t.predicted)

    def schedule(self, view: View) -> list[Action]:
        if not view.waiting:
            return []
        self._recalc(view)
        now = view.now
        serial, self._serial = self._serial, (None if view.changes is None else view.changes.serial)
        cluster_gpus = sum(n.gpus for n in view.nodes)
        waiting = view.waiting
        order, known = self._order, self._known
        size_w = self.w_size / max(1, cluster_gpus)
        if not order:  # after a recalculation: one sort; priorities are then frozen, as in Slurm
            w_age, max_age, fs = self.w_age, self.max_age, self.fairshare
            w_fs = {g: self.w_fairshare * f for g, f in fs.items()}
            default_fs = self.w_fairshare
            order.extend(sorted([
                (-(w_age * (1.0 if now - t.submit >= max_age else max(0.0, now - t.submit) / max_age)
                   + w_fs.get(t.group, default_fs) + size_w * t.gpus), t.submit, t.id, t.gpus, t.predicted)
                for t in waiting.values()
            ]))
            known.update(waiting)
        else:
            ch = view.changes
            if ch is not None and ch.since == serial:  # told what entered: look at just those
                new: Iterable[int] = [tid for tid in ch.waiting if tid in waiting and tid not in known]
            else:
                new = waiting.keys() - known
            for tid in new:
                known.add(tid)
                bisect.insort(order, self._entry(waiting[tid], now, size_w))
            if len(order) > 2 * len(waiting) + 100:
                order[:] = [k for k in order if k[2] in waiting]
                known.intersection_update(waiting)
        free = FreeMap(view.nodes)
        out: list[Action] = []
        started: list[tuple[float, int]] = []  # (predicted end, gpus) of tasks started in this pass
        pos = 0
        for pos, (_, _, tid, _, _) in enumerate(order):
            task = waiting.get(tid)
            if task is None:
                continue
            fit = free.fit(task.nodes, task.gpus_per_node, task.flexible) if task.gpus <= free.total else None
            if fit is None:
                self._backfill(view, task, order, pos + 1, free, started, out)
                break
            free.take(fit.placement)
            started.append((now + task.predicted, task.gpus))
            out.append(Start(task.id, fit.placement))
        return out

    def _backfill(self, view: View, head: TaskView, order: list[tuple[float, float, int, int, float]], pos: int,
                  free: FreeMap, started: list[tuple[float, int]], out: list[Action]) -> None:
        """EASY: start later tasks that do not delay the head's reserved start (see the module docstring)."""
        now, waiting = view.now, view.waiting
        shadow, extra = self._reserve(view, head, free.total, started)
        window = shadow - now
        tested = 0
        for k in range(pos, len(order)):
            if free.total == 0 or tested >= self.max_job_test:
                return
            _, _, tid, gpus, predicted = order[k]
            if tid not in waiting:
                continue
            tested += 1
            if gpus > free.total:
                continue
            in_time = predicted <= window
            if not in_time and gpus > extra:
                continue
            task = waiting[tid]
            fit = free.fit(task.nodes, task.gpus_per_node, task.flexible)
            if fit is None:
                continue
            if not in_time:
                extra -= gpus
            free.take(fit.placement)
            out.append(Start(tid, fit.placement))

    @staticmethod
    def _reserve(view: View, head: TaskView, free_now: int,
                 started: list[tuple[float, int]]) -> tuple[float, int]:
        """The head's reserved start (shadow time) and the GPUs it leaves spare then."""
        now = view.now
        ends = []
        for t in view.running.values():
            if t.start is not None:
                end = t.start + (t.predicted - t.done) / (t.rate if t.rate > 0 else 1e-9)
                ends.append((end if end > now else now, t.gpus))
        ends += started
        ends.sort()
        avail = free_now
        if avail >= head.gpus:
            return now, avail - head.gpus
        for end, gpus in ends:
            avail += gpus
            if avail >= head.gpus:
                return end, avail - head.gpus
        return math.inf, 0
