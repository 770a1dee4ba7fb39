"""Philly trace loader: CSV rows (timestamp, duration, num_gpus, gpu_time, cluster) to ``Job``s.

The CSV may be gzipped (``bundled.open_text``); ``bundled.PHILLY_TRACE`` is the whole trace, shipped
in the package.

Invariants: jobs come out sorted by submit time (ties by row order) with ids
0..n-1 in that order; ``submit`` is seconds since the first submission;
``tenant`` is the virtual cluster. Rows with an empty field are skipped and
counted. Plain ``csv`` and ``datetime.fromisoformat``: the 82k-row trace loads
in a fraction of a second.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .bundled import open_text


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    submit: float  # seconds since the first submission
    duration: float  # true run time on a packed placement, seconds
    gpus: int
    tenant: str


@dataclass(frozen=True, slots=True)
class Trace:
    jobs: list[Job]
    skipped: int  # malformed rows
    start: datetime | None  # wall-clock time of submit == 0


def load_philly(path: str | Path, tenant: str | None = None, limit: int | None = None) -> Trace:
    """Jobs of the trace (of one ``tenant`` only, if given; the first ``limit`` by submit time, if given)."""
    rows: list[tuple[datetime, int, float, int, str]] = []
    skipped = 0
    with open_text(path) as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            return Trace([], 0, None)
        col = {name.strip(): i for i, name in enumerate(header)}
        try:
            i_ts, i_dur, i_gpus, i_cl = col["timestamp"], col["duration"], col["num_gpus"], col["cluster"]
        except KeyError as exc:
            raise ValueError(f"{path}: not a Philly trace, missing column {exc}") from None
        parse = datetime.fromisoformat
        for n, row in enumerate(reader):
            try:
                cl = row[i_cl]
                if tenant is not None and cl != tenant:
                    continue
                ts, dur, gpus = parse(row[i_ts]), float(row[i_dur]), int(row[i_gpus])
            except (IndexError, ValueError):
                skipped += 1
                continue
            if not cl or gpus <= 0 or dur < 0:
                skipped += 1
                continue
            rows.append((ts, n, dur, gpus, cl))
    rows.sort()
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        return Trace([], skipped, None)
    t0 = rows[0][0]
    jobs = [Job(i, (ts - t0).total_seconds(), dur, gpus, cl) for i, (ts, _, dur, gpus, cl) in enumerate(rows)]
    return Trace(jobs, skipped, t0)
