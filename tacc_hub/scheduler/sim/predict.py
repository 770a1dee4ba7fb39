"""Duration predictions from history, never from the truth.

``Predictor.predict(group)`` blends the group's running median of the true
durations of its *completed* jobs (what a live service knows once they end)
with a default: ``(n * median + k * default) / (n + k)`` for ``n`` completed
jobs, so a new group starts at the default and its own history takes over.

Invariants: a prediction uses only durations passed to ``observe`` (the
simulator passes a job's duration when it completes, never before); it is
>= ``floor`` seconds. ``history`` keeps the same observations as histograms
(``scheduler.history``), which the simulator hands to policies in
``View.history``. Running medians: two heaps per group, O(log n) per update.
"""

from __future__ import annotations

import heapq

from ..history import DurationHistory


class _RunningMedian:
    __slots__ = ("hi", "lo")

    def __init__(self) -> None:
        self.lo: list[float] = []  # max-heap (negated): the lower half
        self.hi: list[float] = []  # min-heap: the upper half

    def add(self, x: float) -> None:
        if self.lo and x > -self.lo[0]:
            heapq.heappush(self.hi, x)
        else:
            heapq.heappush(self.lo, -x)
        if len(self.lo) > len(self.hi) + 1:
            heapq.heappush(self.hi, -heapq.heappop(self.lo))
        elif len(self.hi) > len(self.lo):
            heapq.heappush(self.lo, -heapq.heappop(self.hi))

    def __len__(self) -> int:
        return len(self.lo) + len(self.hi)

    def median(self) -> float:
        if len(self.lo) > len(self.hi):
            return -self.lo[0]
        return (-self.lo[0] + self.hi[0]) / 2.0


class Predictor:
    def __init__(self, default: float = 3600.0, weight: float = 5.0, floor: float = 1.0) -> None:
        self.default, self.weight, self.floor = default, weight, floor
        self._medians: dict[str, _RunningMedian] = {}
        self.history = DurationHistory()

    def observe(self, group: str, duration: float) -> None:
        self._medians.setdefault(group, _RunningMedian()).add(duration)
        self.history.observe(group, duration)

    def predict(self, group: str) -> float:
        m = self._medians.get(group)
        if m is None or not len(m):
            return max(self.floor, self.default)
        n = len(m)
        return max(self.floor, (n * m.median() + self.weight * self.default) / (n + self.weight))
