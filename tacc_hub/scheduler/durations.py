"""Predicted run times for the live service, from the runs of similar tasks.

``RunTimePredictor.predict`` answers, in order of preference: the median of the
last runs of the same user's tasks with the same digest (the same code,
environment and resources: the best evidence), else with the same name, else of
all that user's tasks, else the task's time limit (what Slurm assumes). The answer is always
capped by the time limit (a task cannot run longer) and at least ``floor``.

Robust to wrong estimates by construction: a median ignores a few odd runs, and a
policy that sees a task outlive its prediction falls back to attained service
(see the policies). Only successful runs are observed: a crash after ten seconds
says nothing about how long the task takes.

Invariants: bounded memory (``keep`` runs per key, ``max_keys`` keys, least recently
used dropped first); pure (no I/O, no clock).
"""

from __future__ import annotations

import statistics
from collections import OrderedDict, deque


class RunTimePredictor:
    def __init__(self, keep: int = 20, max_keys: int = 100_000, floor: float = 1.0) -> None:
        self.keep, self.max_keys, self.floor = keep, max_keys, floor
        self._runs: OrderedDict[tuple[str, str, str], deque[float]] = OrderedDict()

    def observe(self, owner: str, name: str, digest: str, seconds: float) -> None:
        for key in (("d", owner, digest), ("n", owner, name), ("u", owner, "")):
            runs = self._runs.get(key)
            if runs is None:
                runs = self._runs[key] = deque(maxlen=self.keep)
                if len(self._runs) > self.max_keys:
                    self._runs.popitem(last=False)
            else:
                self._runs.move_to_end(key)
            runs.append(max(0.0, seconds))

    def predict(self, owner: str, name: str, digest: str, time_limit: float) -> float:
        for key in (("d", owner, digest), ("n", owner, name), ("u", owner, "")):
            runs = self._runs.get(key)
            if runs:
                return max(self.floor, min(time_limit, statistics.median(runs)))
        return max(self.floor, time_limit)

    def source(self, owner: str, name: str, digest: str) -> str:
        """Where a prediction comes from, for people: "same task (5 runs)", "time limit"."""
        labels = {"d": "same task", "n": "same name", "u": "your tasks"}
        for key in (("d", owner, digest), ("n", owner, name), ("u", owner, "")):
            runs = self._runs.get(key)
            if runs:
                return f"{labels[key[0]]} ({len(runs)} run{'s' if len(runs) != 1 else ''})"
        return "time limit"
