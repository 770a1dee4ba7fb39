"""Run times of completed tasks, per group, as log-bucket histograms: what a policy may learn from.

A policy never sees a running or waiting task's true duration; it may see this
history of tasks that have *ended* (the live service has their run times in its
store; the simulator's ``Predictor`` records each job's duration when it
completes). Buckets are geometric (``EDGES``: 10 s x 1.5^k), so a histogram is
a few dozen integers per group whatever the number of tasks.

Invariants: only ``observe`` changes a history; ``version`` counts the
observations (a policy caches what it derives and recomputes when it moved);
bucket ``i`` holds durations in ``[lower(i), EDGES[i])`` (``lower(0) == 0``);
durations past the last edge go to the last bucket.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

EDGES: tuple[float, ...] = tuple(10.0 * 1.5 ** k for k in range(38))  # 10 s .. about 380 days
BUCKETS = len(EDGES)


def bucket(seconds: float) -> int:
    """The bucket holding ``seconds``."""
    return min(bisect.bisect_right(EDGES, seconds), BUCKETS - 1)


def lower(i: int) -> float:
    """The lower edge of bucket ``i``."""
    return 0.0 if i <= 0 else EDGES[i - 1]


class DurationHistory:
    """Histograms of completed run times (packed-placement seconds), per group and over all groups."""

    __slots__ = ("_all", "_groups", "past", "version")

    def __init__(self) -> None:
        self._groups: dict[str, list[int]] = {}
        self._all = [0] * BUCKETS
        self.version = 0
        # GPU-seconds each (group, user) used before this process started, as (when, usage) pairs (``when``:
        # the middle of the window it was used in): a policy that keeps fair share starts from it, decayed
        # by its own half-life, instead of from zero (the service seeds it from its store)
        self.past: list[tuple[float, dict[tuple[str, str], float]]] = []

    def seed_usage(self, past: list[tuple[float, dict[tuple[str, str], float]]]) -> None:
        """Past usage (see ``past``)."""
        self.past = [(at, dict(usage)) for at, usage in past]

    def observe(self, group: str, seconds: float) -> None:
        i = bucket(max(0.0, seconds))
        counts = self._groups.get(group)
        if counts is None:
            counts = self._groups[group] = [0] * BUCKETS
        counts[i] += 1
        self._all[i] += 1
        self.version += 1

    def counts(self, group: str | None = None) -> Sequence[int]:
        """Counts per bucket of ``group`` (None: all groups); zeros for a group never seen."""
        if group is None:
            return tuple(self._all)
        counts = self._groups.get(group)
        return tuple(counts) if counts is not None else (0,) * BUCKETS

    def groups(self) -> list[str]:
        return sorted(self._groups)
