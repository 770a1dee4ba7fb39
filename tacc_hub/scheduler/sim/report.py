"""Plain-text tables of replay results (policy x metric), for the CLI and the benchmark."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from .simulator import Result

COLUMNS = [
    ("avg JCT h", lambda r: r.metrics.avg_jct / 3600), ("med JCT h", lambda r: r.metrics.median_jct / 3600),
    ("p99 JCT h", lambda r: r.metrics.p99_jct / 3600), ("avg queue h", lambda r: r.metrics.avg_queue / 3600),
    ("p99 queue h", lambda r: r.metrics.p99_queue / 3600), ("makespan d", lambda r: r.metrics.makespan / 86400),
    ("util %", lambda r: 100 * r.metrics.utilization),
    ("slowdown med", lambda r: median(r.metrics.tenant_slowdown.values()) if r.metrics.tenant_slowdown else 0.0),
    ("slowdown max", lambda r: max(r.metrics.tenant_slowdown.values(), default=0.0)),
    ("preempt", lambda r: float(r.metrics.preemptions)), ("spread", lambda r: float(r.spread_starts)),
    ("jobs/s", lambda r: r.jobs_per_s),
]


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}"


def table(results: Sequence[Result]) -> str:
    """One row per policy. Slowdown columns: the median and the worst of the per-tenant median slowdowns."""
    head = ["policy", *(c for c, _ in COLUMNS)]
    rows = [[r.policy, *(_fmt(f(r)) for _, f in COLUMNS)] for r in results]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths,
                                                                                                    strict=True)))
             for row in [head, *rows]]
    return "\n".join(lines)


def tenant_table(result: Result) -> str:
    items = sorted(result.metrics.tenant_slowdown.items())
    return "\n".join(f"  {t:<8} median slowdown {s:,.2f}" for t, s in items)
