"""CPU-heavy request work off the event loop, in worker processes, bounded per user and in all.

Parsing a large YAML body, validating a large spec or checking an uploaded archive can take
seconds of CPU and allocate millions of objects. In a thread of the service it would still stall
the event loop: threads share one interpreter lock, and the garbage collector stops every thread
while it walks the garbage such a job makes (measured: 58 ms pauses while a thread parsed a 0.8 MB
YAML body). So such work runs in a small pool of worker processes (``forkserver``: forked
from a clean process, never from the threaded service). At most ``workers`` jobs run at once;
each user has at most ``per_user`` jobs running or waiting (more: 429), and at most ``queue``
wait in all (more: 503); both with ``Retry-After``. A worker is replaced after
``tasks_per_worker`` jobs, so that memory a hostile body made a worker grow is given back, and a
pool broken by a dead worker is made anew for the next job.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

T = TypeVar("T")


class Busy(Exception):
    """Too much heavy work already: ``status`` 429 (this user) or 503 (everyone), ``retry_after`` seconds."""

    def __init__(self, status: int, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


class HeavyWork:
    def __init__(self, workers: int = 2, per_user: int = 2, queue: int = 32, tasks_per_worker: int = 50) -> None:
        self.workers, self.per_user, self.queue, self.tasks_per_worker = workers, per_user, queue, tasks_per_worker
        self._pool: ProcessPoolExecutor | None = None
        self._by_user: Counter[str] = Counter()

    @property
    def in_flight(self) -> int:
        return sum(self._by_user.values())

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["tacc_hub.service.heavyjobs"])
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, max_tasks_per_child=self.tasks_per_worker)
        return self._pool

    def start(self) -> None:
        """Start the workers now (a first job would otherwise wait for them, about a second)."""
        pool = self._executor()
        for _ in range(self.workers):
            pool.submit(int)

    async def run(self, user: str, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a worker process, as ``user``'s job; raises :class:`Busy` when over a bound."""
        if self._by_user[user] >= self.per_user:
            raise Busy(429, f"{user} already has {self.per_user} large requests being processed; retry when "
                            "they are answered", 1)
        if self.in_flight >= self.workers + self.queue:
            raise Busy(503, "the service is busy with large requests; retry shortly", 2)
        self._by_user[user] += 1
        try:
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(self._executor(), fn, *args)
            except BrokenProcessPool:
                self._pool = None  # a worker died (killed, out of memory): a new pool for the next job
                raise Busy(503, "a worker of the service died while processing this request; retry", 1) from None
        finally:
            self._by_user[user] -= 1
            if not self._by_user[user]:
                del self._by_user[user]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
