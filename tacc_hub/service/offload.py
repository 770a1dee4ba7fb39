"""CPU-heavy request work off the event loop, bounded per user and in all.

Parsing a large YAML body, validating a large JSON spec or checking an uploaded archive can take
seconds of CPU: on the event loop, one user's upload would stall every other request. Such work
runs here, in a small thread pool. At most ``workers`` jobs run at once; each user has at most
``per_user`` jobs running or waiting (more: 429, retry later), and at most ``queue`` jobs wait
in all (more: 503 with ``Retry-After``), so a flood of large bodies is refused early rather
than queued without end. The event loop keeps answering meanwhile: the service lowers Python's
thread switch interval (``sys.setswitchinterval``) so that a busy worker thread hands the
interpreter back to the loop within a millisecond.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

SWITCH_INTERVAL = 0.001
"""Seconds a thread may hold the interpreter while another waits (Python's default: 0.005)."""


class Busy(Exception):
    """Too much heavy work already: ``status`` 429 (this user) or 503 (everyone), ``retry_after`` seconds."""

    def __init__(self, status: int, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


class HeavyWork:
    def __init__(self, workers: int = 2, per_user: int = 2, queue: int = 32) -> None:
        self.workers, self.per_user, self.queue = workers, per_user, queue
        self._pool: ThreadPoolExecutor | None = None
        self._by_user: Counter[str] = Counter()
        self._sem: asyncio.Semaphore | None = None

    @property
    def in_flight(self) -> int:
        return sum(self._by_user.values())

    async def run(self, user: str, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a worker thread, as ``user``'s job; raises :class:`Busy` when over a bound."""
        if self._by_user[user] >= self.per_user:
            raise Busy(429, f"{user} already has {self.per_user} large requests being processed; retry when "
                            "they are answered", 1)
        if self.in_flight >= self.workers + self.queue:
            raise Busy(503, "the service is busy with large requests; retry shortly", 2)
        if self._pool is None:
            sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="tacc-heavy")
            self._sem = asyncio.Semaphore(self.workers)
        assert self._sem is not None
        self._by_user[user] += 1
        try:
            async with self._sem:
                return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        finally:
            self._by_user[user] -= 1
            if not self._by_user[user]:
                del self._by_user[user]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
