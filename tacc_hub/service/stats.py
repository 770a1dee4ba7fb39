"""Usage arithmetic on runs read from the store: per-day GPU-hours, cluster utilization, wait percentiles.

Pure functions of :class:`~tacc_hub.store.stats.Run` and :class:`~tacc_hub.store.stats.Wait` rows, so
that the admin API, the "My usage" API and ``tacc-hub usage`` compute the same numbers, and unit tests
can check them on rows with known values.

Invariants: days are UTC calendar days; a run is charged to each bucket the part of it that lies in
the bucket times its GPUs (the quota accounting of :meth:`Store.gpu_seconds_by_owner`, split by
bucket), so the buckets of a window add up to the window's total; a task counts once in each day
it ran on; percentiles interpolate linearly between the closest ranks (numpy's default).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tacc_hub.store import DEFAULT_GROUP
from tacc_hub.store.stats import Run, Wait

DAY = 86400.0
QOS_CLASSES = ("interactive", "normal", "low")
"""The spec's QoS classes (``schema/task.py`` ``QoS.qos_class``), always listed in this order."""


def day_starts(now: float, days: int) -> list[float]:
    """The starts of the last ``days`` UTC days, the last one being today."""
    today = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return [(today - timedelta(days=days - 1 - i)).timestamp() for i in range(days)]


def day_label(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d")


def overlap(run: Run, lo: float, hi: float) -> float:
    """Seconds of ``run`` within ``[lo, hi]``."""
    return max(0.0, min(run.end, hi) - max(run.start, lo))


@dataclass
class DaySeries:
    """GPU-hours and tasks per day of each key (user or group); ``days`` are the days' starts."""

    days: list[float]
    hours: dict[str, list[float]]
    tasks: dict[str, list[int]]


def per_day(runs: Iterable[Run], starts: Sequence[float], now: float,
            key: Callable[[Run], str] = lambda r: r.owner) -> DaySeries:
    """GPU-hours each key used on each day of ``starts`` (the last day ends at ``now``)."""
    n = len(starts)
    hours: dict[str, list[float]] = {}
    seen: dict[str, list[set[int]]] = {}
    bounds = [(lo, min(lo + DAY, now)) for lo in starts]
    for run in runs:
        k = key(run)
        first = max(0, math.floor((run.start - starts[0]) / DAY)) if n else 0
        for i in range(first, n):
            lo, hi = bounds[i]
            if lo >= run.end:
                break
            sec = overlap(run, lo, hi)
            if sec <= 0:
                continue
            hours.setdefault(k, [0.0] * n)[i] += run.gpus * sec / 3600.0
            seen.setdefault(k, [set() for _ in range(n)])[i].add(run.task_id)
    return DaySeries(list(starts), hours, {k: [len(s) for s in v] for k, v in seen.items()})


def utilization(runs: Iterable[Run], since: float, now: float, step: float, capacity: int
                ) -> tuple[list[float], list[float], list[float | None]]:
    """Buckets of ``step`` seconds from ``since`` to ``now``: their starts, the mean GPUs allocated in
    each, and that mean over ``capacity`` (None when the cluster has no GPUs)."""
    n = max(1, math.ceil((now - since) / step))
    starts = [since + i * step for i in range(n)]
    gpu_sec = [0.0] * n
    for run in runs:
        first = max(0, math.floor((run.start - since) / step))
        for i in range(first, n):
            lo = starts[i]
            if lo >= run.end:
                break
            gpu_sec[i] += run.gpus * overlap(run, lo, min(lo + step, now))
    lengths = [max(1e-9, min(lo + step, now) - lo) for lo in starts]
    allocated = [g / length for g, length in zip(gpu_sec, lengths, strict=True)]
    fraction = [None if capacity <= 0 else a / capacity for a in allocated]
    return starts, allocated, fraction


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks; None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def wait_percentiles(waits: Iterable[Wait]) -> dict[str, dict[str, float | int | None]]:
    """p50, p90, p99 of the waits (seconds) per QoS class, every class listed (count 0: percentiles None)."""
    by: dict[str, list[float]] = {q: [] for q in QOS_CLASSES}
    for w in waits:
        by.setdefault(w.qos, []).append(w.seconds)
    return {q: {"count": len(v), "p50": percentile(v, 50), "p90": percentile(v, 90), "p99": percentile(v, 99)}
            for q, v in by.items()}


def top_users(runs: Iterable[Run], since: float, now: float, members: dict[str, str], limit: int = 10
              ) -> list[dict[str, object]]:
    """The users with the most GPU-hours in ``[since, now]``: GPU-hours, tasks that ran, share of the total."""
    hours: dict[str, float] = {}
    task_ids: dict[str, set[int]] = {}
    for run in runs:
        sec = overlap(run, since, now)
        if sec <= 0:
            continue
        hours[run.owner] = hours.get(run.owner, 0.0) + run.gpus * sec / 3600.0
        task_ids.setdefault(run.owner, set()).add(run.task_id)
    total = sum(hours.values())
    ranked = sorted(hours.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [{"user": u, "group": members.get(u, DEFAULT_GROUP), "gpu_hours": round(h, 4),
             "tasks": len(task_ids[u]), "share": round(h / total, 4) if total else 0.0} for u, h in ranked]


def usage_rows(runs: Iterable[Run], starts: Sequence[float], now: float, members: dict[str, str],
               by: str = "user") -> list[dict[str, Any]]:
    """One row per day and user (``by="user"``, with the user's group) or per day and group: the CSV export."""
    def key(r: Run) -> str:
        return r.owner if by == "user" else members.get(r.owner, DEFAULT_GROUP)

    series = per_day(runs, starts, now, key)
    rows: list[dict[str, Any]] = []
    for i, day in enumerate(starts):
        for k in sorted(series.hours):
            h, n = series.hours[k][i], series.tasks[k][i]
            if h <= 0 and n == 0:
                continue
            row: dict[str, Any] = {"day": day_label(day)}
            row.update({"user": k, "group": members.get(k, DEFAULT_GROUP)} if by == "user" else {"group": k})
            row.update({"gpu_hours": round(h, 4), "tasks": n})
            rows.append(row)
    return rows
