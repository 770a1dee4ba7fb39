"""Preemptive priority admission: the engine of the LAS and SRPT policies.

``admit(view, key)`` walks every task, waiting and running, from the highest
priority (smallest ``key``) down. A waiting task that fits the free slots
starts; one that does not fit may preempt preemptible running tasks of
strictly lower priority, the lowest first, but only as many as make it fit:
if even all of them would not make room, nobody is preempted for it.

Invariants: a running task is preempted only for a task of strictly higher
priority that then starts in the same pass (no preemption for nothing, no
ping-pong between equals); non-preemptible tasks are never victims; starts and
preemptions come from one ``FreeMap``, so no GPU is handed out twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..policy import Action, Preempt, Start, TaskView, View
from ..topology import FreeMap


def admit(view: View, key: Callable[[TaskView], Any]) -> list[Action]:
    if not view.waiting:
        return []
    keys = {t.id: key(t) for t in view.waiting.values()}
    best_waiting = min(keys.values())
    free_now = sum(len(n.free) for n in view.nodes)
    worst_victim = None
    for t in view.running.values():
        k = keys[t.id] = key(t)
        if t.preemptible and (worst_victim is None or k > worst_victim):
            worst_victim = k
    if free_now == 0 and (worst_victim is None or worst_victim <= best_waiting):
        return []  # nothing free, nobody to preempt for the best waiting task: the common case, kept cheap
    tasks = sorted([*view.waiting.values(), *view.running.values()], key=lambda t: keys[t.id])
    rank = {t.id: i for i, t in enumerate(tasks)}
    victims = [t for t in reversed(tasks) if t.id in view.running and t.preemptible]  # lowest priority first
    victim_gpus = sum(v.gpus for v in victims)
    vi, end = 0, len(victims)  # candidates now: victims[vi:end] (before vi: preempted; from end: outrank)
    free = FreeMap(view.nodes)
    out: list[Action] = []
    for i, task in enumerate(tasks):
        if task.id in view.running:
            continue
        while end > vi and rank[victims[end - 1].id] < i:
            end -= 1
            victim_gpus -= victims[end].gpus
        if free.total == 0 and end <= vi:
            break
        if task.gpus > free.total + victim_gpus:
            continue
        fit = free.fit(task.nodes, task.gpus_per_node, task.flexible)
        taken: list[TaskView] = []
        j = vi
        while fit is None and j < end:
            v = victims[j]
            j += 1
            if v.placement is not None:
                free.give(v.placement)
                taken.append(v)
                fit = free.fit(task.nodes, task.gpus_per_node, task.flexible)
        if fit is None:
            for v in taken:
                if v.placement is not None:
                    free.take(v.placement)
            continue
        victim_gpus -= sum(v.gpus for v in victims[vi:j])
        vi = j
        out.extend(Preempt(v.id) for v in taken)
        free.take(fit.placement)
        out.append(Start(task.id, fit.placement))
    return out
