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

In between, every ``young_interval`` seconds it collects the young generations (0 and 1, a few
milliseconds at most) and freezes what survived. Without that, what a burst of submissions leaves
alive (10,000 queued tasks in 10 s) piles up in the oldest generation, and Python's own full
collections walk all of it, ever more often: measured under the submit benchmark, 23 full
collections of 7-61 ms in 30 s, inside request handlers, most of the p99. Frozen objects are still
freed when their last reference goes; only garbage *cycles* among them wait for the next
``interval`` collection.
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


def freeze_young() -> float:
    """Collect the young generations and freeze the survivors; returns the seconds it took."""
    t0 = time.perf_counter()
    gc.collect(1)
    gc.freeze()
    return time.perf_counter() - t0


class GcPacer:
    """Calls ``refreeze`` at start-up and then at most every ``interval`` seconds (0: never), and
    ``freeze_young`` at most every ``young_interval`` seconds in between (0: never)."""

    def __init__(self, interval: float = 600.0, young_interval: float = 1.0) -> None:
        self.interval = interval
        self.young_interval = young_interval
        self._last: float | None = None
        self._last_young: float | None = None

    def maybe(self, now: float | None = None) -> bool:
        """Collect if one is due; True when a full collection (``refreeze``) was made."""
        if self.interval <= 0:
            return False
        now = time.monotonic() if now is None else now
        if self._last is not None and now - self._last < self.interval:
            if self.young_interval > 0 and (self._last_young is None or now - self._last_young >= self.young_interval):
                self._last_young = now
                freeze_young()
            return False
        self._last = self._last_young = now
        pause = refreeze()
        log.debug("gc: collected and froze %d objects in %.1f ms", gc.get_freeze_count(), pause * 1000)
        return True
