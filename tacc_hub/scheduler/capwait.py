"""When a task held back by its user's or group's GPU cap can start: ``CapClock``.

A forward projection that counts only free GPUs says "starts now" for a task
waiting at its owner's cap, although the GPUs that hold the cap (say the
owner's Jupyter server, hours from its end) must be released first. The clock
keeps, per user and per group, the expected ends of the tasks holding their
GPUs (running ones, then those the projection starts), and answers the earliest
time at which enough of them have ended for the task to fit under the cap.

Invariants: pure; ``earliest`` never answers before ``at``; it assumes tasks
hold their GPUs until their expected end (a projected task counts from now,
which can only make the estimate later, never earlier). Cost: ``add`` is a
bisect insertion; ``earliest`` walks only the ends it must release.
"""

from __future__ import annotations

import bisect


class CapClock:
    """Expected ends of the GPUs each holder (``user:NAME``, ``group:NAME``) has, for cap waits."""

    def __init__(self) -> None:
        self._ends: dict[str, list[tuple[float, int]]] = {}
        self._held: dict[str, int] = {}

    def add(self, holder: str, end: float, gpus: int) -> None:
        """``holder`` holds ``gpus`` GPUs until ``end``."""
        if gpus <= 0:
            return
        bisect.insort(self._ends.setdefault(holder, []), (end, gpus))
        self._held[holder] = self._held.get(holder, 0) + gpus

    def earliest(self, holder: str, gpus: int, cap: int | None, at: float) -> float:
        """The first time >= ``at`` when ``holder`` may take ``gpus`` more under ``cap`` (``at`` with no cap).

        Past every end the holder holds nothing, so a task that fits the cap alone always gets a time; a task
        over the cap by itself is OverQuota and never asked about.
        """
        if cap is None:
            return at
        need = self._held.get(holder, 0) + gpus - cap  # GPUs that must be released first
        if need <= 0:
            return at
        released = 0
        for end, held in self._ends.get(holder, ()):
            released += held
            if released >= need:
                return max(at, end)
        return at
