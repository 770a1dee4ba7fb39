"""Tiresias, discretized 2D-LAS (Gu et al., NSDI 2019): least attained GPU-service first, preemptive.

A task's service is GPU-seconds received so far (GPUs x run time, over all its
runs). Thresholds split it into priority queues: queue 0 below the first
threshold, and so on; lower queue wins, FIFO (submit time) inside a queue. A
waiting task of a better queue preempts running tasks of worse queues
(``admission``); tasks of one queue never preempt each other. Defaults follow the paper's evaluation: two queues, one
threshold of one GPU-hour (3,600 GPU-seconds). Optional starvation guard
(``promote_knob``): a task that has waited longer than ``knob`` x its run time
so far moves back to queue 0 (off by default).

Invariant: the policy asks to be woken (``Wake``) when a running task, with
tasks waiting, crosses a threshold, so demotion happens on time, not at the
next arrival.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import ClassVar

from ..policy import Action, Preempt, Start, TaskView, View, Wake
from .admission import WaitingOrder, admit


class Tiresias:
    name: ClassVar[str] = "tiresias"
    preemptive: ClassVar[bool] = True
    oracle: ClassVar[bool] = False

    def __init__(self, thresholds: Sequence[float] = (3600.0,), promote_knob: float | None = None) -> None:
        self.thresholds = sorted(thresholds)
        self.promote_knob = promote_knob
        thr = self.thresholds
        # a waiting task's key is constant (unless promotion is on): keep the queue sorted across passes
        self._order = WaitingOrder(lambda t: (bisect_right(thr, t.attained), t.submit, t.id))

    def queue(self, task: TaskView, now: float) -> int:
        if self.promote_knob is not None and task.start is None and task.done > 0:
            if now - task.queued > self.promote_knob * task.done:
                return 0
        return bisect_right(self.thresholds, task.attained_at(now))

    def schedule(self, view: View) -> list[Action]:
        now = view.now

        thresholds, knob = self.thresholds, self.promote_knob

        def key(t: TaskView) -> tuple[int, float, int]:
            if t.start is None:
                if knob is not None and t.done > 0 and now - t.queued > knob * t.done:
                    return (0, t.submit, t.id)
                return (bisect_right(thresholds, t.attained), t.submit, t.id)
            return (bisect_right(thresholds, t.attained + t.gpus * (now - t.start)), t.submit, t.id)

        out = admit(view, key, self._order if knob is None else None, level=_queue_of)
        best = self._best_waiting_queue(view, out)
        if best is not None and best < len(self.thresholds):  # a demotion could let a waiting task preempt
            wake = self._next_demotion(view, out)
            if wake is not None:
                out.append(Wake(wake))
        return out

    def _best_waiting_queue(self, view: View, actions: list[Action]) -> int | None:
        started = {a.task_id for a in actions if isinstance(a, Start)}
        if self.promote_knob is not None:
            return 0 if len(started) < len(view.waiting) else None
        for k, t in self._order(view.waiting):
            if t.id not in started:
                return int(k[0])
        return None

    def _next_demotion(self, view: View, actions: list[Action]) -> float | None:
        """When the next task running after ``actions`` crosses a threshold (None: none will)."""
        now = view.now
        preempted = {a.task_id for a in actions if isinstance(a, Preempt)}
        runs = [(t.start, t.attained, t.gpus) for t in view.running.values()
                if t.id not in preempted and t.preemptible and t.start is not None]
        runs += [(now, t.attained, t.gpus) for a in actions if isinstance(a, Start)
                 for t in (view.waiting[a.task_id],) if t.preemptible]
        best: float | None = None
        for start, attained, gpus in runs:
            if gpus == 0 or start is None:
                continue
            q = bisect_right(self.thresholds, attained + gpus * (now - start))
            if q >= len(self.thresholds):
                continue
            at = start + (self.thresholds[q] - attained) / gpus
            if at > now and (best is None or at < best):
                best = at
        return best


def _queue_of(key: tuple[int, float, int]) -> int:
    return key[0]
