"""Start estimates measured in a replay: the policy's own (``explain``) against a Slurm-style one.

``StartEstimates`` is handed to ``simulate(..., estimates=...)``. At each pass where a job is due
an estimate (it arrived since the last pass, or it has waited ``after`` seconds, 1 h, and has
not started yet), it asks, on the view the pass is about to get (before ``schedule``, so the
pass's decisions are what they would be without asking: ``explain`` syncs the policy with the
very view ``schedule`` then sees):
- ours: the policy's ``explain(view)`` (a policy without one gets ``explain.explain`` in queue
  order), corrected by ``calibration.Calibration`` as the service's ``LiveQueue`` corrects it:
  the calibration learns from the starts of the tasks it saw asked, up to this pass; the
  uncorrected projection is kept too (``raw``);
- Slurm-style (``slurm_starts``, as ``squeue --start`` with the builtin scheduler): every running
  job ends at its start plus its time limit, the queue walks in priority order (submit order:
  Slurm's ``priority/basic``), each job at the earliest time enough GPUs are free, holding them
  for its own limit; no backfill. A job's limit is its ``time_limit`` when the trace has one,
  else ``written_limit``: its true duration times 2-10 (log-uniform, fixed per job id), as
  users write limits. Counted in GPUs, not shapes, like ours.
Each ask is an ``Asked`` row (job, kind, when asked, both estimates). A pass with no job due
asks nothing; ``sample`` k asks only for jobs whose id is a multiple of k (the cost is one
``explain`` of the whole queue per pass that asks).

``score`` compares them with the actual first starts: among jobs whose actual wait from the
moment asked was at least ``min_wait`` (10 min), the share whose estimated wait is within 2x
(estimate / actual in [0.5, 2]; no estimate: a miss) and the median relative error
|estimated - actual| / actual.
"""

from __future__ import annotations

import heapq
import math
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Protocol

from ..calibration import Calibration
from ..explain import explain as generic_explain
from ..policy import Explanation, Policy, View
from .metrics import JobRecord
from .trace import Job

SUBMIT = "submit"
LATER = "later"


def slurm_starts(now: float, capacity: int, free: int, running: Iterable[tuple[float, int]],
                 queue: Iterable[tuple[int, int, float]]) -> dict[int, float]:
    """Estimated start of each queued job: ``running`` as (limit end, GPUs), ``queue`` as (id, GPUs, limit) in
    priority order, ``free`` GPUs free now of ``capacity``. A job needing more than ``capacity`` gets none."""
    ends = [(max(now, end), gpus) for end, gpus in running]
    heapq.heapify(ends)
    clock, avail = now, free
    out: dict[int, float] = {}
    for jid, gpus, limit in queue:
        if gpus > capacity:
            continue
        while avail < gpus and ends:
            end, g = heapq.heappop(ends)
            clock = max(clock, end)
            avail += g
        out[jid] = clock
        avail -= gpus
        heapq.heappush(ends, (clock + limit, gpus))
    return out


def written_limit(job: Job) -> float:
    """The job's time limit: its own if the trace has one, else its duration x 2-10 (log-uniform, fixed by id)."""
    own = getattr(job, "time_limit", None)
    if own is not None:
        return float(own)
    u = (zlib.crc32(job.id.to_bytes(8, "little", signed=True)) & 0xFFFFFF) / float(0xFFFFFF)
    return max(job.duration, 60.0) * math.exp(math.log(2.0) + u * (math.log(10.0) - math.log(2.0)))


@dataclass(frozen=True, slots=True)
class Asked:
    job: int
    kind: str  # SUBMIT (at its arrival) or LATER (``after`` seconds later, still waiting)
    at: float  # when asked (view time)
    ours: float | None  # the policy's estimated start, calibrated (what the service shows); None: it gave none
    slurm: float | None  # the Slurm-style estimated start
    raw: float | None = None  # the policy's projection before calibration


class _State(Protocol):  # the simulator's per-job state, as read here
    job: Job
    first_start: float


@dataclass
class StartEstimates:
    after: float = 3600.0  # the second ask, for jobs still waiting this long after arrival
    sample: int = 1  # ask for jobs whose id is a multiple of this
    limit: Callable[[Job], float] = written_limit  # the Slurm-style estimator's time limit of a job, seconds
    calibration: Calibration | None = field(default_factory=Calibration)  # None: the raw projection
    asked: list[Asked] = field(default_factory=list)
    asks: int = 0  # passes that asked
    explain_s: float = 0.0  # time spent in the policy's explain
    slurm_s: float = 0.0  # time spent in the Slurm-style estimate
    _seen: set[int] = field(default_factory=set)
    _later: list[tuple[float, int]] = field(default_factory=list)
    _track: dict[int, _State] = field(default_factory=dict)  # the calibration's tasks not yet started

    def at_pass(self, view: View, policy: Policy, state: Mapping[int, _State]) -> None:
        """Called by the simulator with each pass's view, before ``schedule``."""
        now, waiting = view.now, view.waiting
        due: list[tuple[int, str]] = []
        moved = view.changes.waiting if view.changes is not None else waiting.keys()
        for tid in moved:
            if tid not in self._seen and tid in waiting:
                self._seen.add(tid)
                if tid % self.sample == 0:
                    due.append((tid, SUBMIT))
                    heapq.heappush(self._later, (state[tid].job.submit + self.after, tid))
        later = self._later
        while later and later[0][0] <= now:
            _, tid = heapq.heappop(later)
            st = state.get(tid)
            if st is not None and st.first_start < 0 and tid in waiting:
                due.append((tid, LATER))
        if not due:
            return
        self.asks += 1
        t0 = time.perf_counter()
        fn = getattr(policy, "explain", None)
        raw: dict[int, Explanation] = fn(view) if fn is not None else generic_explain(view, list(waiting.values()))
        cal = self.calibration
        if cal is not None:
            track = self._track
            for tid in [k for k, st in track.items() if st.first_start >= 0]:  # started since the last ask,
                cal.started(tid, track.pop(tid).first_start)  # as the live queue tells it at each start
            cal.asked(now, raw)
            for tid in raw:
                if tid not in track:
                    track[tid] = state[tid]
        ours = cal.adjust(now, raw) if cal is not None else raw
        t1 = time.perf_counter()
        limit = self.limit
        running = [(t.start if t.start is not None else now) + limit(state[t.id].job) for t in view.running.values()]
        queue = sorted(waiting.values(), key=lambda t: (t.submit, t.id))
        slurm = slurm_starts(
            now, sum(n.gpus for n in view.nodes), sum(len(n.free) for n in view.nodes),
            zip(running, (t.gpus for t in view.running.values()), strict=True),
            [(t.id, t.gpus, limit(state[t.id].job)) for t in queue])
        self.slurm_s += time.perf_counter() - t1
        self.explain_s += t1 - t0
        for tid, kind in due:
            e, r = ours.get(tid), raw.get(tid)
            self.asked.append(Asked(tid, kind, now, e.estimated_start if e is not None else None, slurm.get(tid),
                                    r.estimated_start if r is not None else None))


@dataclass(frozen=True, slots=True)
class Score:
    measured: int  # jobs that waited at least min_wait from the moment asked
    ours_2x: float  # share of them whose estimated wait was within 2x of the actual wait
    slurm_2x: float
    ours_err: float  # median |estimated - actual| / actual wait
    slurm_err: float
    ours_ratio: float  # median estimated / actual wait (> 1: estimates too late)
    slurm_ratio: float
    raw_2x: float = math.nan  # the same for the projection before calibration
    raw_ratio: float = math.nan


def _ratio(est: float | None, at: float, actual: float) -> float:
    return math.inf if est is None else max(0.0, est - at) / actual


def score(asked: Sequence[Asked], records: Iterable[JobRecord], kind: str, min_wait: float = 600.0) -> Score:
    """How the asks of ``kind`` compare with the actual first starts in ``records`` (see the module docstring)."""
    starts = {r.id: r.first_start for r in records}
    ours: list[float] = []  # estimated / actual wait
    slurm: list[float] = []
    raw: list[float] = []
    for a in asked:
        start = starts.get(a.job)
        if a.kind != kind or start is None or start - a.at < min_wait:
            continue
        actual = start - a.at
        ours.append(_ratio(a.ours, a.at, actual))
        slurm.append(_ratio(a.slurm, a.at, actual))
        raw.append(_ratio(a.raw, a.at, actual))
    if not ours:
        return Score(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)

    def within(rs: list[float]) -> float:
        return sum(0.5 <= r <= 2.0 for r in rs) / len(rs)

    def err(rs: list[float]) -> float:
        return median(abs(r - 1.0) for r in rs)

    return Score(len(ours), within(ours), within(slurm), err(ours), err(slurm), median(ours), median(slurm),
                 within(raw), median(raw))
