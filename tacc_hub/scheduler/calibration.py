"""Start estimates corrected by how the estimator's own past estimates came out.

A projection (``explain``, ``tacc_explain``) does not know of the tasks that will
arrive later and rank ahead, nor of the shapes GPUs are free in, so its estimates
can run early (or late) by a factor that depends on the load and the workload.
``Calibration`` learns that factor online: the first estimate given to each task
(``asked``) is kept, and when the task starts (``started``) the ratio actual /
estimated wait joins a window of the last ``window`` ratios. ``factor`` is the
one, within [``lo``, ``hi``], that would have put the most of them within 2x (the
promise a user judges an estimate by), the nearest to their median among equals,
with ``prior`` extra ratios of 1 (a few samples do not move it): where the
projection is already right, the median alone would still move it, and cost. ``adjust`` scales every
estimated wait by it. Only what has already happened is used (no future
information), so a replay measures what a live service would show.

It learns from tasks that waited at least ``min_wait`` (10 min): the waits users
see and ask about. Tasks that start at once (most of them on a lightly loaded
cluster) would pull the factor toward zero and make every later estimate "now".
Estimated waits under a minute count as one minute, so a task told "now" that did
not start is corrected too.

Cost: O(1) per task asked or started; ``adjust`` O(tasks) plus O(window log
window) when the window changed. It never changes a scheduling decision.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import replace

from .policy import Explanation

MIN_WAIT = 600.0  # learn from tasks that waited at least this long (s)
FLOOR = 60.0  # estimated waits shorter than this count as this long (s)


class Calibration:
    def __init__(self, window: int = 200, prior: int = 20, lo: float = 1 / 3, hi: float = 3.0,
                 min_wait: float = MIN_WAIT) -> None:
        self.prior = prior
        self.lo = lo
        self.hi = hi
        self.min_wait = min_wait
        self.ratios: deque[float] = deque(maxlen=window)  # actual / estimated wait of the last tasks started
        self.first: dict[int, tuple[float, float]] = {}  # task -> (when first asked, its estimated wait then)
        self._factor: float | None = None  # ``best_factor`` of ``ratios`` (None: recompute)

    def asked(self, now: float, raw: Mapping[int, Explanation]) -> None:
        """Keep the first estimate each task of ``raw`` got (uncorrected; tasks without one are skipped)."""
        first = self.first
        for tid, e in raw.items():
            if e.estimated_start is not None and tid not in first:
                first[tid] = (now, max(0.0, e.estimated_start - now))

    def started(self, tid: int, at: float) -> None:
        """Task ``tid`` started at ``at`` (or left the queue: pass it to ``forget``)."""
        got = self.first.pop(tid, None)
        if got is None:
            return
        asked_at, est = got
        wait = at - asked_at
        if wait >= self.min_wait:
            self.ratios.append(wait / max(est, FLOOR))
            self._factor = None

    def forget(self, tid: int) -> None:
        """Task ``tid`` left the queue without starting (cancelled)."""
        self.first.pop(tid, None)

    def factor(self) -> float:
        """The correction applied to estimated waits (see the module docstring)."""
        if self._factor is None:
            self._factor = best_factor(self.ratios, self.prior, self.lo, self.hi)
        return self._factor

    def adjust(self, now: float, raw: Mapping[int, Explanation]) -> dict[int, Explanation]:
        """``raw`` with every estimated wait scaled by ``factor`` (never before ``now``)."""
        f = self.factor()
        if f == 1.0:
            return dict(raw)
        out: dict[int, Explanation] = {}
        for tid, e in raw.items():
            est = e.estimated_start
            out[tid] = e if est is None else replace(e, estimated_start=now + max(est - now, FLOOR) * f)
        return out


def best_factor(ratios: Iterable[float], prior: int, lo: float, hi: float) -> float:
    """The f in [lo, hi] that puts the most ``ratios`` within 2x (in [f / 2, 2 f]); ties go to the one nearest
    their median, shrunk toward 1 as if ``prior`` more ratios of 1 were there (and those count as hits where 1
    is strictly inside the band: a few samples do not move a projection that is right).

    The count only changes where an edge of the band crosses a ratio: those edges, 1 and the shrunk median are
    the candidates."""
    logs = sorted(math.log(r) for r in ratios if r > 0)
    n = len(logs)
    if not n:
        return 1.0
    w, llo, lhi = math.log(2.0), math.log(lo), math.log(hi)
    mid = logs[n // 2] if n % 2 else (logs[n // 2 - 1] + logs[n // 2]) / 2
    m = min(lhi, max(llo, mid * n / (n + prior)))

    def hits(c: float) -> int:
        inside = bisect_right(logs, c + w + 1e-12) - bisect_left(logs, c - w - 1e-12)
        return inside + (prior if abs(c) < w - 1e-9 else 0)

    best, most = m, hits(m)
    for x in [0.0, *logs]:
        for c in (x + w, x - w, x):
            c = min(lhi, max(llo, c))
            h = hits(c)
            if h > most or (h == most and abs(c - m) < abs(best - m)):
                best, most = c, h
    return min(hi, max(lo, math.exp(best)))
