"""The audit trail: who did what to what, when, with the object before and after (``audit_events``).

:class:`AuditStore` is a mixin of :class:`~tacc_hub.store.store.Store` (through
:class:`~tacc_hub.store.running.RunningStore`, whose callers keep ``add_audit`` and ``audit``).

Invariants:

* Rows are only ever added; ``action`` is one of :data:`AUDIT_ACTIONS`.
* ``detail``, ``before`` and ``after`` are JSON written here from dicts (``before``/``after`` NULL when there
  is nothing: a quota that did not exist, one deleted); a token's secret is never among them.
* ``target`` names the object acted on, ``kind:name`` (``task:12``, ``array:40``, ``pipeline:3``,
  ``user:alice``, ``token:7``, ``quota:user/alice``, ``quota:group/nlp``), at most 128 characters.
* ``request_id`` is the API request that did it (None for the CLI and the service's own work).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .models import AUDIT_ACTION_LEN, AUDIT_TARGET_LEN, NAME_LEN, REQUEST_ID_LEN, audit_events

AUDIT_ACTIONS = (
    "exec",  # a command run inside a running task (tcloud exec)
    "shell",  # a terminal opened inside a running task (tcloud shell)
    "extend",  # a running task's time limit extended
    "proxy",  # a task's web port opened through the service's proxy (once per user, task and port)
    "cancel",  # a task, array or pipeline cancelled by an admin who does not own it
    "quota_set",  # a user's or group's quota created or replaced
    "quota_delete",  # a user's or group's quota row removed
    "group_set",  # a user put in a group
    "group_clear",  # a user put back in group "default"
    "token_create",  # an API token made (its id, user, admin flag, note, expiry: never the token)
    "token_revoke",  # an API token revoked
)
"""Every action the audit trail records (docs/audit.md says what each row holds)."""
MAX_LIMIT = 10000


@dataclass(frozen=True, slots=True)
class AuditEvent:
    id: int
    at: float
    actor: str
    action: str
    task_id: int | None
    detail: dict[str, Any]
    target: str | None = None
    before: Any = None
    after: Any = None
    request_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "at": self.at, "actor": self.actor, "action": self.action, "target": self.target,
                "task_id": self.task_id, "before": self.before, "after": self.after, "detail": self.detail,
                "request_id": self.request_id}


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, sort_keys=True, default=str)


def _load(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:  # written here as JSON: only a row edited by hand gets here
        return {"unreadable": text[:200]}


class AuditStore:
    _engine: sa.Engine
    _clock: Callable[[], float]

    def add_audit(self, actor: str, action: str, task_id: int | None, detail: dict[str, Any] | None = None, *,
                  target: str | None = None, before: dict[str, Any] | None = None,
                  after: dict[str, Any] | None = None, request_id: str | None = None) -> int:
        """Record that ``actor`` did ``action`` to ``target`` (and ``task_id``), the object being ``before`` and
        then ``after`` (JSON-able, or None for nothing); returns the event's id."""
        if action not in AUDIT_ACTIONS or len(action) > AUDIT_ACTION_LEN:
            raise ValueError(f"action: one of {', '.join(AUDIT_ACTIONS)}, not {action!r}")
        if target is not None and (not target or len(target) > AUDIT_TARGET_LEN):
            raise ValueError(f"target: 1 to {AUDIT_TARGET_LEN} characters")
        if request_id is not None and len(request_id) > REQUEST_ID_LEN:
            raise ValueError(f"request_id: at most {REQUEST_ID_LEN} characters")
        values = {"at": self._clock(), "actor": str(actor)[:NAME_LEN], "action": action,
                  "task_id": None if task_id is None else int(task_id), "detail": _dump(detail or {}),
                  "target": target, "before": None if before is None else _dump(before),
                  "after": None if after is None else _dump(after), "request_id": request_id}
        with self._engine.begin() as conn:
            res = conn.execute(audit_events.insert().values(**values))
            key = res.inserted_primary_key
            return int(key[0]) if key else 0

    def audit(self, *, task_id: int | None = None, actor: str | None = None, action: str | None = None,
              target: str | None = None, since: float | None = None, until: float | None = None,
              before_id: int | None = None, limit: int = 100) -> list[AuditEvent]:
        """Audit events, newest first, filtered by task, actor, action, target and time (``since`` <= at <
        ``until``); ``before_id``: only those with a smaller id (the next page after an event of that id).
        At most ``limit`` (1..10000)."""
        c = audit_events.c
        stmt = sa.select(audit_events)
        if task_id is not None:
            stmt = stmt.where(c.task_id == int(task_id))
        if actor is not None:
            stmt = stmt.where(c.actor == actor)
        if action is not None:
            stmt = stmt.where(c.action == action)
        if target is not None:
            stmt = stmt.where(c.target == target)
        if since is not None:
            stmt = stmt.where(c.at >= float(since))
        if until is not None:
            stmt = stmt.where(c.at < float(until))
        if before_id is not None:
            stmt = stmt.where(c.id < int(before_id))
        stmt = stmt.order_by(c.id.desc()).limit(max(1, min(int(limit), MAX_LIMIT)))
        with self._engine.connect() as conn:
            return [AuditEvent(id=r.id, at=r.at, actor=r.actor, action=r.action, task_id=r.task_id,
                               detail=_load(r.detail) or {}, target=r.target, before=_load(r.before),
                               after=_load(r.after), request_id=r.request_id)
                    for r in conn.execute(stmt)]
