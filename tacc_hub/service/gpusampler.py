"""Samples the GPU utilization of every running task into the store (``GET /api/tasks/ID/usage``).

Every ``gpu_sample_interval`` seconds (``TaccHub.gpu_sample_interval``; 0: off) a pass starts a read
(``executor.gpu_usage``, with ``gpu_query_command``) for each RUNNING task that holds GPUs and whose
previous read has ended; at most :data:`CONCURRENCY` reads run at once, each bounded by
:data:`READ_TIMEOUT` seconds (the executors bound their commands more tightly: gpuquery). A read's
answer becomes one row (mean utilization over the GPUs that answered, their memory summed, how many
answered), written as soon as it comes, off the event loop; rows that come while a write runs go in the
next one. So a slow, hanging or failing read delays nothing but itself: not the event loop, not the
scheduler, not the other tasks' rows. A pass's reads share one run of the command on this machine
(:func:`~tacc_hub.executors.gpuquery.sampling_pass`). Each task is pruned to
:data:`~tacc_hub.store.running.MAX_SAMPLES_PER_TASK` rows every :data:`PRUNE_EVERY` rows written.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.pool import StaticPool

from tacc_hub.executors.gpuquery import sampling_pass
from tacc_hub.store import TaskStatus
from tacc_hub.store.running import MAX_SAMPLES_PER_TASK

from .base import ServiceContext

log = logging.getLogger("tacc_hub.gpusampler")

CONCURRENCY = 4
"""Reads running at once (a few hung reads leave the others their turn)."""
READ_TIMEOUT = 20.0
"""Seconds a read may take in all before it is cancelled (no row)."""
PRUNE_EVERY = 100
"""Rows written for a task between two prunes of its samples."""

Row = tuple[int, float, float, float | None, int]
T = TypeVar("T")


async def off_loop(store: Any, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a thread, unless the store is one in-memory SQLite connection (tests), which a
    second thread must not share: then here."""
    engine = getattr(store, "engine", None)
    if engine is not None and isinstance(engine.pool, StaticPool):
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


def sample_row(task_id: int, at: float, usage: list[tuple[float, float | None]]) -> Row | None:
    """One stored sample from a read: mean util, memory summed over the GPUs that gave it, GPUs answered."""
    if not usage:
        return None
    util = sum(u for u, _ in usage) / len(usage)
    mems = [m for _, m in usage if m is not None]
    return (task_id, at, util, sum(mems) if mems else None, len(usage))


class GpuSampler:
    def __init__(self, ctx: ServiceContext, *, concurrency: int = CONCURRENCY,
                 read_timeout: float = READ_TIMEOUT) -> None:
        self.ctx = ctx
        self.read_timeout = read_timeout
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._loop_task: asyncio.Task[None] | None = None
        self._reads: dict[int, asyncio.Task[None]] = {}  # task id -> its read in flight
        self._rows: list[Row] = []
        self._writer: asyncio.Task[None] | None = None
        self._written: dict[int, int] = {}  # task id -> rows written since its last prune
        self.passes = 0

    def start(self) -> None:
        """Begin sampling every ``gpu_sample_interval`` seconds (on the running event loop)."""
        interval = self.ctx.running.gpu_sample_interval
        if interval <= 0 or not self.ctx.running.gpu_query_command:
            log.info("GPU sampling is off (gpu_sample_interval=%g, gpu_query_command=%r)", interval,
                     list(self.ctx.running.gpu_query_command))
            return
        self._loop_task = asyncio.create_task(self._loop(interval))

    async def stop(self) -> None:
        """Stop sampling: the loop and reads in flight are cancelled; rows already read are written."""
        tasks = [t for t in (self._loop_task, *self._reads.values()) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop_task = None
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)

    async def _loop(self, interval: float) -> None:
        while True:
            began = time.monotonic()
            try:
                self.sample()
            except Exception:
                log.exception("GPU sampling pass failed")
            await asyncio.sleep(max(0.05, interval - (time.monotonic() - began)))

    def due(self) -> list[tuple[int, dict[str, Any], Any]]:
        """(task id, executor state, placement) of each running task with GPUs and no read in flight."""
        out = []
        for task_id, live in list(self.ctx.controller.live.items()):
            placement = live.placement
            if (live.status != TaskStatus.RUNNING or live.busy or placement is None or task_id in self._reads
                    or not any(n.gpus for n in placement.nodes)):
                continue
            out.append((task_id, dict(live.state), placement))
        return out

    def sample(self) -> list[asyncio.Task[None]]:
        """Start one pass: a read for every task that is due (returns them, for tests)."""
        self.passes += 1
        live = self.ctx.controller.live
        for task_id in [t for t in self._written if t not in live]:
            del self._written[task_id]
        started = []
        with sampling_pass():  # the reads started here share one local run of the command
            for task_id, state, placement in self.due():
                task = asyncio.create_task(self._read(task_id, state, placement))
                self._reads[task_id] = task
                task.add_done_callback(functools.partial(self._read_done, task_id))
                started.append(task)
        return started

    def _read_done(self, task_id: int, task: asyncio.Task[None]) -> None:
        if self._reads.get(task_id) is task:
            del self._reads[task_id]

    async def _read(self, task_id: int, state: dict[str, Any], placement: Any) -> None:
        ex = self.ctx.controller.executor
        command = tuple(self.ctx.running.gpu_query_command)
        try:
            async with self._slots:
                usage = await asyncio.wait_for(ex.gpu_usage(task_id, state, placement, command), self.read_timeout)
        except TimeoutError:
            log.warning("GPU usage of task %s: no answer in %g s", task_id, self.read_timeout)
            return
        except Exception as exc:  # one task's failure stops neither the others nor the next pass
            log.warning("GPU usage of task %s could not be read: %s", task_id, exc)
            return
        row = sample_row(task_id, time.time(), usage)
        if row is not None:
            self._rows.append(row)
            if self._writer is None or self._writer.done():
                self._writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        """Write the rows read so far (one transaction), and again while more came meanwhile; prune now and then."""
        store = self.ctx.store
        while self._rows:
            rows, self._rows = self._rows, []
            prune = []
            for task_id, *_ in rows:
                self._written[task_id] = self._written.get(task_id, 0) + 1
                if self._written[task_id] >= PRUNE_EVERY:
                    self._written[task_id] = 0
                    prune.append(task_id)
            try:
                await off_loop(store, _store_rows, store, rows, prune)
            except Exception:
                log.exception("writing %d GPU samples failed", len(rows))


def _store_rows(store: Any, rows: list[Row], prune: list[int]) -> None:
    store.add_gpu_samples(rows)
    for task_id in prune:
        store.prune_gpu_samples(task_id, MAX_SAMPLES_PER_TASK)
