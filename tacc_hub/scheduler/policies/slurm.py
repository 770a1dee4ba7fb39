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

import math
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

    def priority(self, task: TaskView, now: float, cluster_gpus: int) -> float:
        age = min(1.0, max(0.0, now - task.submit) / self.max_age)
        fs = self.fairshare.get(task.group, 1.0)
        size = task.gpus / max(1, cluster_gpus)
        return self.w_age * age + self.w_fairshare * fs + self.w_size * size

    def schedule(self, view: View) -> list[Action]:
        if not view.waiting:
            return []
        self._recalc(view)
        now = view.now
        cluster_gpus = sum(n.gpus for n in view.nodes)
        order = sorted(view.waiting.values(), key=lambda t: (-self.priority(t, now, cluster_gpus), t.submit, t.id))
        free = FreeMap(view.nodes)
        out: list[Action] = []
        shadow, extra = math.inf, 0
        started: list[tuple[float, int]] = []  # (predicted end, gpus) of tasks started in this pass
        head: TaskView | None = None
        for tested, task in enumerate(order):
            if head is not None and (tested > self.max_job_test or free.total == 0):
                break
            if task.gpus > free.total:
                fit = None
            else:
                fit = free.fit(task.nodes, task.gpus_per_node, task.flexible)
            if head is None:
                if fit is None:
                    head = task
                    shadow, extra = self._reserve(view, task, free.total, started)
                    continue
            elif fit is None:
                continue
            else:
                ends_in_time = now + task.predicted <= shadow
                if not ends_in_time and task.gpus > extra:
                    continue
                if not ends_in_time:
                    extra -= task.gpus
            free.take(fit.placement)
            started.append((now + task.predicted, task.gpus))
            out.append(Start(task.id, fit.placement))
        return out

    @staticmethod
    def _reserve(view: View, head: TaskView, free_now: int,
                 started: list[tuple[float, int]]) -> tuple[float, int]:
        """The head's reserved start (shadow time) and the GPUs it leaves spare then."""
        now = view.now
        ends = [(max(now, t.start + (t.predicted - t.done) / max(t.rate, 1e-9)), t.gpus)
                for t in view.running.values() if t.start is not None]
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
