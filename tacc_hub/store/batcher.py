"""Group commit for task submissions: many concurrent ``submit`` calls, few transactions.

Invariants:

* Every :meth:`InsertBatcher.submit` either returns the inserted record or raises; a row is
  never inserted twice and never silently dropped. When a batch fails, every waiter of that
  batch gets the exception and none of its rows is in the database (one transaction).
* Rows are inserted in the order they were submitted; ids follow that order.
* There is no timer: the drain coroutine takes whatever has queued (up to ``max_batch``) as
  soon as it gets to run, so a lone submit pays no added latency and a burst shares one
  commit.
* A waiter cancelled before its batch is written is left out of the batch. One cancelled
  after that is still inserted (its row is committed; only the answer is dropped).
* After :meth:`InsertBatcher.stop` returns, the queue is empty and ``submit`` refuses.

Threading: with ``threaded=True`` (the service, on a database file or a server) each batch is
written in one worker thread of the batcher's own, while the event loop goes on serving requests;
batches are still written one at a time, in order (the drain coroutine awaits each), so ordering
and the one-transaction rule hold as before. Why: most batches take a few milliseconds, but the
commit that crosses SQLite's WAL auto-checkpoint (1,000 pages, about every 700 submits) copies
the WAL into the database and fsyncs it: 35-50 ms, and on the loop thread every request in flight
waited for it (the submit benchmark's p99). SQLite and the database drivers release the GIL
while they work, so the loop keeps running; the Python part of a batch (SQLAlchemy) does hold it,
so a threaded batcher lowers Python's thread switch interval to ``SWITCH_INTERVAL`` (1 ms, as
``service.offload`` does): the loop gets the interpreter back within a millisecond, not 5 (measured:
+15-25% submits/s at 50 clients, and p99 a little lower). With ``threaded=False`` (the default; a shared
in-memory database, whose one connection must not be used from two threads) the store is called
inline on the loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from .records import NewTask, TaskRecord

log = logging.getLogger(__name__)

SWITCH_INTERVAL = 0.001
"""Seconds a thread may hold the interpreter while another waits (Python's default: 0.005)."""


class _Inserter(Protocol):
    def insert_tasks(self, rows: list[NewTask]) -> list[TaskRecord]: ...


class InsertBatcher:
    """Queue :class:`NewTask` rows from many coroutines; insert them in batches."""

    def __init__(self, store: _Inserter, *, max_batch: int = 500, threaded: bool = False) -> None:
        if max_batch < 1:
            raise ValueError("max_batch: must be at least 1")
        self._store = store
        self._max_batch = max_batch
        self._threaded = threaded
        self._pool: ThreadPoolExecutor | None = None
        self._queue: deque[tuple[NewTask, asyncio.Future[TaskRecord]]] = deque()
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.batches = 0
        """How many batches were written (successfully or not); for tests and metrics."""

    @property
    def running(self) -> bool:
        return self._task is not None and not self._closing

    def start(self) -> None:
        """Start the drain coroutine on the running event loop."""
        if self._task is not None:
            raise RuntimeError("InsertBatcher already started")
        self._wakeup = asyncio.Event()
        if self._threaded:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="tacc-insert")
            sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
        self._task = asyncio.get_running_loop().create_task(self._drain(), name="tacc-insert-batcher")

    async def stop(self) -> None:
        """Refuse new submits, write everything queued, and end the drain coroutine."""
        if self._task is None or self._wakeup is None:
            return
        self._closing = True
        self._wakeup.set()
        try:
            await self._task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if not self._task.cancelled() or (me is not None and me.cancelling()):
                raise  # the caller was cancelled; only a drain cancelled by itself (loop shutdown) is let go
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False)

    async def submit(self, row: NewTask) -> TaskRecord:
        """Insert ``row`` (in the next batch) and return its record."""
        if not self.running or self._wakeup is None:
            raise RuntimeError("InsertBatcher is not running")
        fut: asyncio.Future[TaskRecord] = asyncio.get_running_loop().create_future()
        self._queue.append((row, fut))
        self._wakeup.set()
        return await fut

    async def _drain(self) -> None:
        assert self._wakeup is not None
        try:
            while True:
                if not self._queue:
                    if self._closing:
                        return
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                await self._write_one_batch()
                # Let the waiters just resolved (and new submits) run before the next batch.
                await asyncio.sleep(0)
        finally:
            # Reached on stop() with an empty queue, or if the drain task is cancelled
            # (loop shutdown): nobody may wait forever.
            while self._queue:
                _, fut = self._queue.popleft()
                if not fut.done():
                    fut.set_exception(RuntimeError("InsertBatcher stopped before the task was inserted"))

    async def _insert(self, rows: list[NewTask]) -> list[TaskRecord]:
        if self._pool is None:
            return self._store.insert_tasks(rows)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._store.insert_tasks, rows)

    async def _write_one_batch(self) -> None:
        rows: list[NewTask] = []
        futs: list[asyncio.Future[TaskRecord]] = []
        while self._queue and len(rows) < self._max_batch:
            row, fut = self._queue.popleft()
            if fut.cancelled():
                continue
            rows.append(row)
            futs.append(fut)
        if not rows:
            return
        self.batches += 1
        try:
            records = await self._insert(rows)
            if len(records) != len(rows):
                raise RuntimeError(f"insert_tasks returned {len(records)} records for {len(rows)} rows")
        except asyncio.CancelledError:
            # The drain was cancelled (loop shutdown) while the thread wrote: the batch may or may not be
            # committed; its waiters must not wait forever.
            for fut in futs:
                if not fut.done():
                    fut.set_exception(RuntimeError("InsertBatcher stopped while the task was being inserted"))
            raise
        except Exception as exc:
            log.warning("inserting a batch of %d tasks failed: %s", len(rows), exc)
            for fut in futs:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for fut, rec in zip(futs, records, strict=True):
            if not fut.done():
                fut.set_result(rec)

    async def __aenter__(self) -> InsertBatcher:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
