"""What the store keeps about running tasks: their runs (attempts), time extensions, GPU samples (and audit events).

:class:`RunningStore` is a mixin of :class:`~tacc_hub.store.store.Store` (it uses the store's engine
and clock). Rows are only ever added (``prune_gpu_samples`` aside), so that a task's history, and who
did what to it, stays on record.

Invariants:

* ``task_attempts``: one row per ended run (``attempt`` 0 is the first, as ``TACC_ATTEMPT``);
  ``outcome`` is one of :data:`OUTCOMES`.
* A task's time limit is its plan's plus the sum of its ``time_extensions``.
* Audit events: see :mod:`tacc_hub.store.audit` (``AUDIT_ACTIONS`` and ``AuditEvent`` are re-exported here).
* ``gpu_samples`` holds at most :data:`MAX_SAMPLES_PER_TASK` rows per task (the oldest go first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .audit import AUDIT_ACTIONS, AuditEvent, AuditStore
from .models import NAME_LEN, gpu_samples, task_attempts, time_extensions

OUTCOMES = ("succeeded", "failed", "cancelled", "lost", "preempted", "node_failure", "time_limit", "restarted")
MAX_SAMPLES_PER_TASK = 2880
"""GPU samples kept per task: a day at the default 30 s interval (older ones are dropped)."""
MAX_REASON = 4000
__all__ = ["AUDIT_ACTIONS", "OUTCOMES", "Attempt", "AuditEvent", "GpuSample", "RunningStore"]


@dataclass(frozen=True, slots=True)
class Attempt:
    task_id: int
    attempt: int
    started_at: float
    finished_at: float
    outcome: str
    exit_code: int | None
    reason: str | None
    nodes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "started_at": self.started_at, "finished_at": self.finished_at,
                "outcome": self.outcome, "exit_code": self.exit_code, "reason": self.reason, "nodes": self.nodes}


@dataclass(frozen=True, slots=True)
class GpuSample:
    at: float
    util: float
    memory_mib: float | None
    gpus: int


class RunningStore(AuditStore):
    """Runs, extensions and GPU samples; the audit trail (``add_audit``, ``audit``) is :class:`AuditStore`'s."""

    _engine: sa.Engine
    _clock: Callable[[], float]

    # -- attempts ----------------------------------------------------------------------

    def add_attempt(self, task_id: int, attempt: int, started_at: float, finished_at: float, outcome: str, *,
                    exit_code: int | None = None, reason: str | None = None, nodes: Iterable[str] = ()) -> None:
        """Record one ended run of a task."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome: one of {', '.join(OUTCOMES)}, not {outcome!r}")
        with self._engine.begin() as conn:
            conn.execute(task_attempts.insert().values(
                task_id=int(task_id), attempt=int(attempt), started_at=float(started_at),
                finished_at=float(max(finished_at, started_at)), outcome=outcome, exit_code=exit_code,
                reason=None if reason is None else str(reason)[:MAX_REASON], nodes=",".join(nodes) or None))

    def attempts(self, task_id: int) -> list[Attempt]:
        """The task's ended runs, first first."""
        stmt = (sa.select(task_attempts).where(task_attempts.c.task_id == int(task_id))
                .order_by(task_attempts.c.attempt, task_attempts.c.id))
        with self._engine.connect() as conn:
            return [Attempt(task_id=r.task_id, attempt=r.attempt, started_at=r.started_at,
                            finished_at=r.finished_at, outcome=r.outcome, exit_code=r.exit_code, reason=r.reason,
                            nodes=(r.nodes or "").split(",") if r.nodes else [])
                    for r in conn.execute(stmt)]

    def attempt_counts(self, task_ids: Iterable[int]) -> dict[int, int]:
        """How many ended runs each of these tasks has (tasks with none are left out)."""
        ids = [int(t) for t in task_ids]
        if not ids:
            return {}
        stmt = (sa.select(task_attempts.c.task_id, sa.func.count()).where(task_attempts.c.task_id.in_(ids))
                .group_by(task_attempts.c.task_id))
        with self._engine.connect() as conn:
            return {int(t): int(n) for t, n in conn.execute(stmt)}

    # -- time extensions ---------------------------------------------------------------

    def add_extension(self, task_id: int, seconds: int, by_user: str) -> int:
        """Record an extension of a task's time limit; returns the task's extensions in all, in seconds."""
        if type(seconds) is not int or seconds <= 0:
            raise ValueError("seconds: a whole number > 0")
        with self._engine.begin() as conn:
            conn.execute(time_extensions.insert().values(task_id=int(task_id), at=self._clock(), seconds=seconds,
                                                         by_user=str(by_user)[:NAME_LEN]))
            total = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(time_extensions.c.seconds), 0))
                                 .where(time_extensions.c.task_id == int(task_id))).scalar_one()
        return int(total)

    def extensions(self, task_ids: Iterable[int]) -> dict[int, int]:
        """Seconds each task's limit was extended by (tasks never extended are left out)."""
        ids = [int(t) for t in task_ids]
        if not ids:
            return {}
        stmt = (sa.select(time_extensions.c.task_id, sa.func.sum(time_extensions.c.seconds))
                .where(time_extensions.c.task_id.in_(ids)).group_by(time_extensions.c.task_id))
        with self._engine.connect() as conn:
            return {int(t): int(s) for t, s in conn.execute(stmt)}

    # -- GPU samples -------------------------------------------------------------------

    def add_gpu_samples(self, rows: Iterable[tuple[int, float, float, float | None, int]]) -> None:
        """Add samples ``(task_id, at, util, memory_mib, gpus)``; a second sample at the same instant is dropped."""
        params = [{"task_id": int(t), "at": float(at), "util": float(u),
                   "memory_mib": None if m is None else float(m), "gpus": int(g)} for t, at, u, m, g in rows]
        if not params:
            return
        with self._engine.begin() as conn:
            for p in params:
                try:
                    with conn.begin_nested():
                        conn.execute(gpu_samples.insert().values(**p))
                except sa.exc.IntegrityError:
                    continue

    def gpu_samples(self, task_id: int, *, since: float | None = None) -> list[GpuSample]:
        """A task's samples, oldest first."""
        stmt = sa.select(gpu_samples).where(gpu_samples.c.task_id == int(task_id))
        if since is not None:
            stmt = stmt.where(gpu_samples.c.at >= float(since))
        with self._engine.connect() as conn:
            return [GpuSample(at=r.at, util=r.util, memory_mib=r.memory_mib, gpus=r.gpus)
                    for r in conn.execute(stmt.order_by(gpu_samples.c.at))]

    def prune_gpu_samples(self, task_id: int, keep: int = MAX_SAMPLES_PER_TASK) -> None:
        """Drop all but the newest ``keep`` samples of a task."""
        with self._engine.begin() as conn:
            cut = conn.execute(sa.select(gpu_samples.c.at).where(gpu_samples.c.task_id == int(task_id))
                               .order_by(gpu_samples.c.at.desc()).offset(keep).limit(1)).scalar()
            if cut is not None:
                conn.execute(gpu_samples.delete().where(gpu_samples.c.task_id == int(task_id),
                                                        gpu_samples.c.at <= cut))
