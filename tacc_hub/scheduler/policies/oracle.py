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
from .admission import admit


class SrptOracle:
    name: ClassVar[str] = "srpt-oracle"
    preemptive: ClassVar[bool] = True
    oracle: ClassVar[bool] = True

    def schedule(self, view: View) -> list[Action]:
        now = view.now

        def key(t: TaskView) -> tuple[float, float, int]:
            total = t.duration if t.duration is not None else t.predicted
            return (total - t.done_at(now), t.submit, t.id)

        return admit(view, key)
