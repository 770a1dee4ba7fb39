"""Keep the garbage collector's full collections out of scheduling passes.

A full (oldest-generation) collection walks every object the collector tracks: with 10,000
waiting tasks, their views and the store's rows in memory it takes 30-40 ms, and it starts at
whatever allocation crosses a threshold, often inside a scheduling pass (measured with
``benchmarks/bench_live_pass.py``: the slowest passes were collections, not scheduling).

The service collects at moments it chooses instead, between passes: after start-up it collects
and freezes what is there (``gc.freeze``: the long-lived queue and rows leave the collector's
generations, so later collections only walk what was made since), and every ``interval``
seconds it unfreezes, collects and freezes again, so garbage made meanwhile is still reclaimed.
Young-generation collections (cheap) run as usual.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)


def refreeze() -> float:
    """Collect everything now and freeze the survivors; returns the seconds it took (the pause)."""
    t0 = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t0


class GcPacer:
    """Calls ``refreeze`` at start-up and then at most every ``interval`` seconds (0: never)."""

    def __init__(self, interval: float = 600.0) -> None:
        self.interval = interval
        self._last: float | None = None

    def maybe(self, now: float | None = None) -> bool:
        if self.interval <= 0:
            return False
        now = time.monotonic() if now is None else now
        if self._last is not None and now - self._last < self.interval:
            return False
        self._last = now
        pause = refreeze()
        log.debug("gc: collected and froze %d objects in %.1f ms", gc.get_freeze_count(), pause * 1000)
        return True
