"""Start estimates corrected by how the estimator's own past estimates came out.

A projection (``explain``, ``tacc_explain``) does not know of the tasks that will
arrive later and rank ahead, nor of the shapes GPUs are free in, so its
estimates run early, by a factor that depends on the load and the workload.
``Calibration`` learns that factor online: the first estimate given to each task
(``asked``) is kept, and when the task starts (``started``) the ratio actual /
estimated wait joins a window of the last ``window`` ratios, of at most ``horizon``
seconds ago (7 days: a regime that is over, a burst last month, must not correct
today's estimates; where few tasks wait, the window is mostly empty and the
projection shown as it is). ``factor`` is their median, shrunk toward 1 while
there are few (as if ``prior`` more ratios of 1 were in the window) and kept within
[``lo``, ``hi``] (1 to 3): a regime the window learned from may be over by the
time its tasks start, and the bound limits what it carries over (see
benchmarks/README.md, "Start estimates"). ``adjust`` scales every estimated wait
by the factor. Only what has already happened is used (no future
information), so a replay measures what a live service would show.

It learns from tasks that waited at least ``min_wait`` (10 min): the waits users
see and ask about. Tasks that start at once (most of them on a lightly loaded
cluster) would pull the factor toward zero and make every later estimate "now".
Estimated waits under a minute count as one minute, so a task told "now" that did
not start is corrected too.

Cost: O(1) per task asked or started; ``adjust`` O(tasks) plus a median of the
window when it changed. It never changes a scheduling decision.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from statistics import median

from .policy import Explanation

MIN_WAIT = 600.0  # learn from tasks that waited at least this long (s)
FLOOR = 60.0  # estimated waits shorter than this count as this long (s)
HORIZON = 7 * 86400.0  # learn only from starts this recent (s)


class Calibration:
    def __init__(self, window: int = 200, prior: int = 20, lo: float = 1.0, hi: float = 3.0,
                 min_wait: float = MIN_WAIT, horizon: float = HORIZON) -> None:
        self.prior = prior
        self.lo = lo
        self.hi = hi
        self.min_wait = min_wait
        self.horizon = horizon
        self.times: deque[float] = deque(maxlen=window)  # when each of ``ratios`` was learned
        self.ratios: deque[float] = deque(maxlen=window)  # actual / estimated wait of the last tasks started
        self.first: dict[int, tuple[float, float]] = {}  # task -> (when first asked, its estimated wait then)
        self._factor: float | None = None  # the median of ``ratios`` (None: recompute)

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
            self.times.append(at)
            self._factor = None

    def forget(self, tid: int) -> None:
        """Task ``tid`` left the queue without starting (cancelled)."""
        self.first.pop(tid, None)

    def factor(self, now: float | None = None) -> float:
        """The correction applied to estimated waits at ``now`` (see the module docstring)."""
        if now is not None:
            while self.times and self.times[0] < now - self.horizon:  # too old: forgotten
                self.times.popleft()
                self.ratios.popleft()
                self._factor = None
        if self._factor is None:
            n = len(self.ratios)
            f = math.exp(math.log(max(median(self.ratios), 1e-9)) * n / (n + self.prior)) if n else 1.0
            self._factor = min(self.hi, max(self.lo, f))
        return self._factor

    def adjust(self, now: float, raw: Mapping[int, Explanation]) -> dict[int, Explanation]:
        """``raw`` with every estimated wait scaled by ``factor`` (never before ``now``)."""
        f = self.factor(now)
        if f == 1.0:
            return dict(raw)
        out: dict[int, Explanation] = {}
        for tid, e in raw.items():
            est = e.estimated_start
            out[tid] = e if est is None else replace(e, estimated_start=now + max(est - now, FLOOR) * f)
        return out
