"""What ``tacc`` believes about run times: Gittins indices on attained service, from history.

The model is a distribution of run times per group: the group's histogram of
completed run times (``View.history``), blended with the histogram of all
groups (``prior`` pseudo-observations) and a flat-in-log floor (one
pseudo-observation spread over every bucket), so a new group, or no history at
all, still gets a sensible heavy-tailed belief (then the order is close to
least-attained-service, the safe choice when nothing is known).

For a task that has run ``a`` seconds (packed-equivalent work, ``TaskView.done``),
its Gittins index is ``max over quanta b: P(S <= b | S > a) / E[min(S, b) - a | S > a]``:
the best rate at which running it completes it. Serving the highest index first
minimizes mean response time on one server for a known distribution (Gittins;
it is SRPT when durations are known and LAS when the hazard rate decreases), and it
uses the attained service, so a task that outlives its prediction is demoted
rather than trusted. Ages are bucketed (``history.EDGES``, x1.5), so an index
changes only when a task crosses a bucket edge.

Invariants: pure arithmetic on the histograms it is given (never a live task's
duration); indices are > 0; ``remaining`` estimates are >= 1 s; a model is
immutable once built (``Model.build``), the policy rebuilds it when the history
has grown by ``rebuild_growth``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..frozen import Frozen
from ..history import BUCKETS, EDGES, DurationHistory, bucket, lower

_REP = tuple(5.0 if i == 0 else math.sqrt(lower(i) * EDGES[i]) for i in range(BUCKETS))  # where a bucket's jobs end


@dataclass(frozen=True, slots=True)
class Curve(Frozen):
    """One group's belief, per age bucket."""

    index: tuple[float, ...]  # Gittins index (1/s), made non-increasing in age (see ``levels``)
    mean_left: tuple[float, ...]  # expected remaining seconds
    median_left: tuple[float, ...]  # median remaining seconds
    level: tuple[int, ...] = ()  # the index on a log scale: floor(log(1/index) / log(ratio))
    next_level: tuple[int, ...] = ()  # the first bucket after this one with another level (BUCKETS: none)


def curve(weights: Sequence[float], ratio: float = 4.0) -> Curve:
    """Indices and remaining-time estimates for the distribution ``weights`` (mass per bucket)."""
    index, mean_left, median_left = [], [], []
    w: list[float] = [float(x) for x in weights]  # (typed locals: native doubles when compiled; same arithmetic)
    rep: list[float] = list(_REP)
    edges: list[float] = list(EDGES)
    for a in range(BUCKETS):
        la = lower(a)
        tail = sum(w[a:])
        if tail <= 0:
            index.append(1e-9)
            mean_left.append(max(1.0, la))
            median_left.append(max(1.0, la))
            continue
        best, done_mass, done_work = 0.0, 0.0, 0.0
        half, med, found = tail / 2.0, 0.0, False
        for b in range(a, BUCKETS):
            wb = w[b]
            done_mass += wb
            left = rep[b] - la
            done_work += wb * (left if left > 0.0 else 0.0)  # (as max(0.0, left))
            if not found and done_mass >= half:
                med, found = (left if left > 1.0 else 1.0), True  # (as max(1.0, left))
            work = done_work + (tail - done_mass) * (edges[b] - la)
            if work > 0 and done_mass / work > best:
                best = done_mass / work
        index.append(max(best, 1e-9))
        mean_left.append(max(1.0, done_work / tail))
        median_left.append(med if found else max(1.0, la))
    for a in range(1, BUCKETS):  # non-increasing: a task never climbs back above one it overtook (no ping-pong)
        index[a] = min(index[a], index[a - 1])
    level = [int(-math.log(x) // math.log(ratio)) for x in index]
    nxt = [BUCKETS] * BUCKETS
    for a in range(BUCKETS - 2, -1, -1):
        nxt[a] = a + 1 if level[a + 1] != level[a] else nxt[a + 1]
    return Curve(tuple(index), tuple(mean_left), tuple(median_left), tuple(level), tuple(nxt))


class Model:
    """Curves per group, from a history snapshot taken when built; each group's curve is computed when first
    asked for (a pure function of the snapshot: the same curve as computed at once; most groups of a large
    history are never asked for between two rebuilds)."""

    __slots__ = ("_default", "_ratio", "_weights", "curves", "version")

    def __init__(self, curves: dict[str, Curve], default: Curve, version: int,
                 weights: dict[str, list[float]] | None = None, ratio: float = 4.0) -> None:
        self.curves, self._default, self.version = curves, default, version
        self._weights = weights if weights is not None else {}  # per group not computed yet: its bucket masses
        self._ratio = ratio

    @classmethod
    def build(cls, history: DurationHistory | None, ratio: float = 4.0, prior: float = 20.0) -> Model:
        flat = [1.0 / BUCKETS] * BUCKETS
        if history is None or history.version == 0:
            return cls({}, curve(flat, ratio), 0)
        total = history.counts()
        n = sum(total)
        base = [t + f for t, f in zip(total, flat, strict=True)]
        default = curve(base, ratio)
        weights = {}
        for g in history.groups():
            counts = history.counts(g)
            weights[g] = [c + prior * t / n + f for c, t, f in zip(counts, total, flat, strict=True)]
        return cls({}, default, history.version, weights, ratio)

    def of(self, group: str) -> Curve:
        c = self.curves.get(group)
        if c is None:
            w = self._weights.pop(group, None)
            if w is None:
                return self._default
            c = self.curves[group] = curve(w, self._ratio)
        return c


def age_bucket(done: float) -> int:
    return bucket(done)
