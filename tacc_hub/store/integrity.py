"""Consistency checks of a store: what ``tacc-hub check`` reports and what the hostile-input tests assert.

Each problem is one line naming the table and row. Checked: the database's own integrity
(``PRAGMA integrity_check`` on SQLite), that every task's status is a known one and its times
and fields fit that status (a running task has ``started_at``, a finished one
``finished_at`` not before it, only finished tasks have an exit code), that ``spec`` and
``plan`` are JSON objects, that task ids never ran ahead of the id sequence, and that token
rows are well-formed. Read-only: it never repairs anything.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from .models import api_tokens, tasks
from .status import TaskStatus

_STARTED = {TaskStatus.RUNNING}  # cancelling may come straight from starting


def _json_object(text: Any) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (TypeError, ValueError):
        return False


def integrity_problems(engine: sa.Engine) -> list[str]:
    """Every inconsistency found in the store behind ``engine`` (empty: consistent)."""
    problems: list[str] = []
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            for (line,) in conn.exec_driver_sql("PRAGMA integrity_check"):
                if line != "ok":
                    problems.append(f"sqlite: {line}")
            seq = conn.exec_driver_sql("SELECT seq FROM sqlite_sequence WHERE name = 'tasks'").scalar()
            top = conn.execute(sa.select(sa.func.max(tasks.c.id))).scalar()
            if top is not None and (seq is None or top > seq):
                problems.append(f"tasks: id {top} is beyond the id sequence ({seq})")
        known = {s.value for s in TaskStatus}
        cols = (tasks.c.id, tasks.c.status, tasks.c.spec, tasks.c.plan, tasks.c.submitted_at, tasks.c.started_at,
                tasks.c.finished_at, tasks.c.exit_code, tasks.c.owner)
        for tid, status, spec, plan, submitted, started, finished, exit_code, owner in conn.execute(sa.select(*cols)):
            where = f"task {tid}"
            if status not in known:
                problems.append(f"{where}: unknown status {status!r}")
                continue
            st = TaskStatus(status)
            if not owner:
                problems.append(f"{where}: no owner")
            if not _json_object(spec) or not _json_object(plan):
                problems.append(f"{where}: spec or plan is not a JSON object")
            if st in _STARTED and started is None:
                problems.append(f"{where}: {status} without started_at")
            if st.is_terminal() and finished is None:
                problems.append(f"{where}: {status} without finished_at")
            if not st.is_terminal() and (finished is not None or exit_code is not None):
                problems.append(f"{where}: {status} but has finished_at or an exit code")
            if started is not None and started < submitted - 1.0:
                problems.append(f"{where}: started before it was submitted")
            if started is not None and finished is not None and finished < started:
                problems.append(f"{where}: finished before it started")
        for tid, user, token_hash, created, revoked in conn.execute(sa.select(
                api_tokens.c.id, api_tokens.c.user, api_tokens.c.token_hash, api_tokens.c.created_at,
                api_tokens.c.revoked_at)):
            if not user or not token_hash:
                problems.append(f"token {tid}: no user or no hash")
            if revoked is not None and revoked < created:
                problems.append(f"token {tid}: revoked before it was created")
    return problems
