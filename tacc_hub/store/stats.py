"""Read-only queries behind the usage pages and the usage export: runs in a window, waits, GPU samples.

:class:`StatsStore` is a mixin of :class:`~tacc_hub.store.store.Store` (it uses the store's engine).
Each method is one statement per table, whatever the window's length: the per-day, per-hour and
per-user arithmetic is done on the rows by :mod:`tacc_hub.service.stats`, so one query serves every
bucket.

Invariants:

* ``runs_between`` returns exactly the runs :meth:`~tacc_hub.store.quotas.QuotaStore.gpu_seconds_by_owner`
  charges: the current run of every task with GPUs that started (a running one ends at ``now``) and
  every earlier run kept in ``runs``, each clipped to nothing here (callers clip to their buckets).
* ``waits_between`` covers tasks whose *current* run started within the window; the wait is
  ``started_at - submitted_at`` and the QoS class is the spec's ``qos.class`` ("normal" when absent).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from .models import gpu_samples, runs, tasks


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a task holding GPUs: ``[start, end]`` (``end`` is ``now`` for a running task)."""

    task_id: int
    owner: str
    gpus: int
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Wait:
    """How long a task waited before its current run started, and its QoS class."""

    task_id: int
    owner: str
    qos: str
    seconds: float


@dataclass(frozen=True, slots=True)
class SampleMean:
    """The mean of a task's GPU utilization samples (percent) and how many there were."""

    util: float
    samples: int


class StatsStore:
    _engine: sa.Engine

    def runs_between(self, since: float, now: float, owner: str | None = None) -> list[Run]:
        """Every run with GPUs overlapping ``[since, now]`` (of ``owner`` only, when given)."""
        since, now = float(since), float(now)
        out: list[Run] = []
        with self._engine.connect() as conn:
            for table in (tasks, runs):
                t = table.c
                stmt = sa.select(t.task_id if table is runs else t.id, t.owner, t.gpus, t.started_at,
                                 t.finished_at).where(
                    t.gpus > 0, t.started_at.is_not(None), t.started_at < now,
                    sa.or_(t.finished_at.is_(None), t.finished_at > since))
                if owner is not None:
                    stmt = stmt.where(t.owner == owner)
                for tid, who, gpus, start, end in conn.execute(stmt):
                    end = now if end is None or end > now else float(end)
                    out.append(Run(int(tid), str(who), int(gpus), float(start), end))
        return out

    def waits_between(self, since: float, until: float) -> list[Wait]:
        """The wait of every task whose current run started within ``[since, until]``."""
        t = tasks.c
        stmt = sa.select(t.id, t.owner, t.spec, t.submitted_at, t.started_at).where(
            t.started_at.is_not(None), t.started_at >= float(since), t.started_at <= float(until))
        out: list[Wait] = []
        with self._engine.connect() as conn:
            for tid, owner, spec, submitted, started in conn.execute(stmt):
                out.append(Wait(int(tid), str(owner), _qos_class(spec), max(0.0, float(started) - float(submitted))))
        return out

    def sample_means(self, task_ids: Iterable[int]) -> dict[int, SampleMean]:
        """Mean GPU utilization (percent) of each task that has samples; tasks without any are absent."""
        ids = sorted({int(i) for i in task_ids})
        if not ids:
            return {}
        g = gpu_samples.c
        stmt = sa.select(g.task_id, sa.func.avg(g.util), sa.func.count()).where(g.task_id.in_(ids)).group_by(g.task_id)
        with self._engine.connect() as conn:
            return {int(tid): SampleMean(float(avg), int(n)) for tid, avg, n in conn.execute(stmt)}


def _qos_class(spec_text: str | None) -> str:
    """The spec's QoS class (the API stores specs by alias: ``{"qos": {"class": ...}}``)."""
    try:
        qos = (json.loads(spec_text or "{}") or {}).get("qos") or {}
        value = qos.get("class") or qos.get("qos_class") or "normal"
    except (ValueError, AttributeError):
        return "normal"
    return str(value)[:32]
