"""Preemptive priority admission: the engine of the LAS and SRPT policies.

``admit(view, key)`` walks every task, waiting and running, from the highest
priority (smallest ``key``) down. A waiting task that fits the free slots
starts; one that does not fit may preempt preemptible running tasks of
strictly lower priority (or priority level), the lowest first, but only as many as make it fit:
if even all of them would not make room, nobody is preempted for it.

Invariants: a running task is preempted only for a task of strictly higher
priority that then starts in the same pass (no preemption for nothing, no
ping-pong between equals); non-preemptible tasks are never victims; starts and
preemptions come from one ``FreeMap``, so no GPU is handed out twice.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..policy import Action, Changes, Preempt, Start, TaskView, View
from ..topology import FreeMap


class WaitingOrder:
    """The waiting tasks sorted by a key that is constant while a task waits, kept across passes.

    New arrivals, and tasks whose view was replaced, are inserted (bisect); an entry holds
    the exact ``TaskView`` it was made from, so entries of tasks that left the queue, or
    whose view was replaced (a task that comes back with new service, a service that
    re-reads a task), are skipped, and dropped when they are more than the live ones. A
    view whose ``changes`` follow the last one synced is synced from them alone
    (O(changes)); any other view is compared task by task.
    """

    __slots__ = ("entries", "key", "seq", "serial", "view_of")

    def __init__(self, key: Callable[[TaskView], Any]) -> None:
        self.key = key
        self.entries: list[tuple[Any, int, int, TaskView]] = []  # (key, id, sequence number, view)
        self.view_of: dict[int, TaskView] = {}  # per waiting task: the view its live entry holds
        self.seq = 0
        self.serial: int | None = None  # ``View.changes.serial`` of the view last synced with

    def sync(self, waiting: Mapping[int, TaskView], changes: Changes | None = None) -> None:
        ch, view_of = changes, self.view_of
        told = ch is not None and ch.since == self.serial
        self.serial = None if ch is None else ch.serial
        if told:  # the caller says which tasks entered, left or were replaced
            assert ch is not None
            ids: Iterable[int] = ch.waiting
        else:
            for tid in [tid for tid in view_of if tid not in waiting]:
                del view_of[tid]
            ids = waiting.keys()
        for tid in ids:
            t = waiting.get(tid)
            if t is None:
                view_of.pop(tid, None)
            elif view_of.get(tid) is not t:
                view_of[tid] = t
                self.seq += 1
                bisect.insort(self.entries, (self.key(t), tid, self.seq, t))
        if len(self.entries) > 2 * len(waiting) + 100:
            self.entries = [e for e in self.entries if waiting.get(e[1]) is e[3]]

    def __call__(self, waiting: Mapping[int, TaskView]) -> Iterator[tuple[Any, TaskView]]:
        """The waiting tasks, by key: ``waiting`` is what was synced last (``view_of`` holds its views now)."""
        view_of = self.view_of  # (a dict: compiled, looked up natively, not through ``Mapping.get``)
        for k, tid, _, t in self.entries:
            if view_of.get(tid) is t:
                yield k, t


def admit(view: View, key: Callable[[TaskView], Any], order: WaitingOrder | None = None,
          level: Callable[[Any], Any] | None = None) -> list[Action]:
    """Actions for one pass (see the module docstring).

    ``order``: the waiting tasks presorted by ``key``. ``level``: the part of a key that
    preemption compares (default: all of it); a task preempts only tasks of a strictly
    worse level (Tiresias: the queue, so tasks of one queue never preempt each other).
    """
    lv = level or (lambda k: k)
    waiting = view.waiting
    if order is not None:
        order.sync(waiting, view.changes)
    if not waiting:
        return []
    ranked = order(waiting) if order is not None else iter(sorted(((key(t), t) for t in waiting.values()),
                                                                   key=lambda e: e[0]))
    first = next(ranked, None)
    if first is None:
        return []
    run = sorted(((key(t), t) for t in view.running.values() if t.preemptible), key=lambda e: e[0], reverse=True)
    victims = [t for _, t in run]  # lowest priority first
    vkeys = [k for k, _ in run]
    free_now = sum(len(n.free) for n in view.nodes)
    if free_now == 0 and (not vkeys or lv(vkeys[0]) <= lv(first[0])):
        return []  # nothing free, nobody to preempt for the best waiting task: the common case, kept cheap
    victim_gpus = sum(v.gpus for v in victims)
    vi, end = 0, len(victims)  # candidates now: victims[vi:end] (before vi: preempted; from end: outrank)
    free = FreeMap(view.nodes)
    failed: set[tuple[int, int, bool]] = set()  # shapes that did not fit the current free map
    out: list[Action] = []
    for k, task in itertools.chain((first,), ranked):
        while end > vi and lv(vkeys[end - 1]) <= lv(k):
            end -= 1
            victim_gpus -= victims[end].gpus
        if free.total == 0 and end <= vi:
            break
        if task.gpus > free.total + victim_gpus:
            continue
        shape = (task.nodes, task.gpus_per_node, task.flexible)
        if end <= vi and shape in failed:
            continue
        fit = free.fit(*shape)
        taken: list[TaskView] = []
        j = vi
        while fit is None and j < end:
            v = victims[j]
            j += 1
            if v.placement is not None:
                free.give(v.placement)
                taken.append(v)
                fit = free.fit(*shape)
        if fit is None:
            for v in taken:
                if v.placement is not None:
                    free.take(v.placement)
            failed.add(shape)
            continue
        victim_gpus -= sum(v.gpus for v in victims[vi:j])
        vi = j
        out.extend(Preempt(v.id) for v in taken)
        free.take(fit.placement)
        failed.clear()
        out.append(Start(task.id, fit.placement))
    return out
