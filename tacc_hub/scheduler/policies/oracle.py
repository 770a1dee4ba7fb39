"""SRPT with the truth: shortest remaining processing time first, preemptive.

A reference, not a competitor: it reads true durations (``oracle = True``), which
the simulator hides from every other policy. Priority: remaining packed-run
seconds (``duration - done``), ties by submit time then id; higher-priority
waiting tasks preempt lower-priority running ones (``admission``). A running
task's remaining time only shrinks, so no wake-ups are needed.
"""

from __future__ import annotations

from typing import ClassVar

from ..policy import Action, TaskView, View
from .admission import WaitingOrder, admit


class SrptOracle:
    name: ClassVar[str] = "srpt-oracle"
    preemptive: ClassVar[bool] = True
    oracle: ClassVar[bool] = True

    def __init__(self) -> None:
        # a waiting task's remaining time is constant: keep the queue sorted across passes
        self._order = WaitingOrder(lambda t: (_total(t) - t.done, t.submit, t.id))

    def schedule(self, view: View) -> list[Action]:
        now = view.now

        def key(t: TaskView) -> tuple[float, float, int]:
            return (_total(t) - t.done_at(now), t.submit, t.id)

        return admit(view, key, self._order)


def _total(t: TaskView) -> float:
    return t.duration if t.duration is not None else t.predicted
