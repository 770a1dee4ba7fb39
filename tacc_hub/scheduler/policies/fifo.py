"""Strict FIFO with gang placement: the baseline every cluster starts from.

Invariants: tasks start in queue order; the first that does not fit blocks all
behind it (no backfill, no preemption); placement packs (``topology``).
"""

from __future__ import annotations

from typing import ClassVar

from ..policy import Action, Start, View
from ..topology import FreeMap


class FifoGang:
    name: ClassVar[str] = "fifo"
    preemptive: ClassVar[bool] = False
    oracle: ClassVar[bool] = False

    def schedule(self, view: View) -> list[Action]:
        if not view.waiting:
            return []
        free = FreeMap(view.nodes)
        out: list[Action] = []
        for task in view.waiting.values():
            fit = free.fit(task.nodes, task.gpus_per_node, task.flexible)
            if fit is None:
                break
            free.take(fit.placement)
            out.append(Start(task.id, fit.placement))
        return out
