"""The audit trail over the API: ``GET /api/admin/audit``, and :func:`record`, which the admin endpoints call.

``GET /api/admin/audit[?actor=&action=&target=&task=&since=&until=&limit=&before=]`` answers
``{"events": [{"id", "at", "actor", "action", "target", "task_id", "before", "after", "detail",
"request_id"}], "next": ID or null}``, newest first; ``next`` is the ``before`` of the next page (null on
the last). ``since``/``until``: seconds since the epoch or an ISO 8601 date or time (UTC unless it names
its offset), ``since`` <= at < ``until``.

Invariants: a caller who is not an admin gets 403 before anything is read; every query parameter is
checked (400 naming it) before the store is asked; an event is recorded only after the action it
records has succeeded, by the authenticated caller (never a name from the request) and with the
request's own id (:mod:`.requestid`).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from tacc_hub.store.audit import AUDIT_ACTIONS
from tacc_hub.store.models import AUDIT_TARGET_LEN, NAME_LEN

from .base import MAX_ID, ApiError, ApiHandler

MAX_PAGE = 1000
_EPOCH = re.compile(r"\d{1,11}(?:\.\d{1,9})?")
_RELATIVE = re.compile(r"(\d{1,6})([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_LONGEST_WHEN = 40


class AuditEventOut(BaseModel):
    id: int
    at: float = Field(description="When, in seconds since the epoch.")
    actor: str = Field(description="Who: the authenticated user, or cli:<unix user> for the tacc-hub CLI.")
    action: str = Field(description=f"What: one of {', '.join(AUDIT_ACTIONS)}.")
    target: str | None = Field(None, description="To what: task:12, array:40, pipeline:3, user:alice, token:7, "
                                                 "quota:user/alice, quota:group/nlp.")
    task_id: int | None = None
    before: Any = Field(None, description="The object before the action (null: there was none).")
    after: Any = Field(None, description="The object after it (null: there is none any more).")
    detail: dict[str, Any] = Field(default_factory=dict, description="More about it (an exec's argv, ...).")
    request_id: str | None = Field(None, description="The API request that did it (X-Request-Id).")


class AuditListOut(BaseModel):
    events: list[AuditEventOut]
    next: int | None = Field(None, description="Pass as before= for the next (older) page; null: no more.")


def record(handler: ApiHandler, action: str, target: str, *, before: dict[str, Any] | None = None,
           after: dict[str, Any] | None = None, task_id: int | None = None,
           detail: dict[str, Any] | None = None) -> None:
    """Record that the handler's caller did ``action`` to ``target`` in this request (call it once the action has
    succeeded)."""
    handler.ctx.store.add_audit(handler.user, action, task_id, detail or {}, target=target[:AUDIT_TARGET_LEN],
                                before=before, after=after, request_id=handler.request_id)


def parse_when(raw: str, field: str, *, now: float | None = None) -> float:
    """A time as seconds since the epoch: a number of seconds, an ISO 8601 date (``2026-12-01``, midnight UTC) or
    time (``2026-12-01T10:00``, UTC unless it names its offset), or with ``now`` given also a time that long
    ago (``7d``, ``24h``, ``30m``, ``90s``, ``2w``). ValueError naming ``field`` otherwise."""
    text = raw.strip()
    if not text or len(text) > _LONGEST_WHEN or not text.isascii():
        raise ValueError(f"{field}: not a time (seconds since the epoch or an ISO 8601 date)")
    if _EPOCH.fullmatch(text):
        return float(text)
    rel = _RELATIVE.fullmatch(text)
    if rel is not None and now is not None:
        return now - int(rel.group(1)) * _UNITS[rel.group(2)]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        hint = ", or a duration ago such as 7d or 24h" if now is not None else ""
        raise ValueError(f"{field}: {text!r} is not a time (seconds since the epoch or an ISO 8601 date such as "
                         f"2026-12-01{hint})") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def check_text(raw: str, field: str, longest: int) -> str:
    """A name to filter on: 1..``longest`` characters, none of them a control or format character."""
    if not raw or len(raw) > longest or any(unicodedata.category(ch)[0] == "C" for ch in raw):
        raise ValueError(f"{field}: 1 to {longest} printable characters")
    return raw


def check_action(raw: str, field: str = "action") -> str:
    if raw not in AUDIT_ACTIONS:
        raise ValueError(f"{field}: one of {', '.join(AUDIT_ACTIONS)}")
    return raw


_PARAMS = {
    "actor": "only this actor's (a user, or cli:<unix user>)",
    "action": f"only this action: {', '.join(AUDIT_ACTIONS)}",
    "target": "only this target (task:12, user:alice, quota:group/nlp, token:7, ...)",
    "task": "only events of this task id",
    "since": "only at or after this time: seconds since the epoch or an ISO 8601 date/time (UTC)",
    "until": "only before this time (as since)",
    "limit": f"page size, 1..{MAX_PAGE} (default 100)",
    "before": "only events with a smaller id: the previous answer's next",
}


class AuditHandler(ApiHandler):
    openapi = {"get": {"summary": "Admin: the audit trail, newest first: who did what to what, when, with the "
                                  "object before and after (quota and group changes, admin cancels, tokens made "
                                  "and revoked, time extensions, exec and shell sessions).",
                       "params": _PARAMS, "response": AuditListOut,
                       "errors": {"400": "a query parameter is not valid; `errors` names it",
                                  "403": "not an admin"}}}

    def _text(self, name: str, check: Any) -> Any:
        # the raw value: tornado's get_query_argument drops control characters, which must be refused instead
        values = self.request.query_arguments.get(name)
        if not values:
            return None
        try:
            return check(values[-1].decode("utf-8"))
        except UnicodeDecodeError:
            raise ApiError(400, f"query parameter {name}: not UTF-8", [{"field": name, "message": "not UTF-8"}]) \
                from None
        except ValueError as exc:
            raise ApiError(400, f"query parameter {exc}", [{"field": name, "message": str(exc)}]) from None

    def get(self) -> None:
        self.require_admin()
        actor = self._text("actor", lambda v: check_text(v, "actor", NAME_LEN))
        action = self._text("action", check_action)
        target = self._text("target", lambda v: check_text(v, "target", AUDIT_TARGET_LEN))
        since = self._text("since", lambda v: parse_when(v, "since"))
        until = self._text("until", lambda v: parse_when(v, "until"))
        task = self.int_arg("task", 0, 1, MAX_ID) if self.get_query_argument("task", None) is not None else None
        limit = self.int_arg("limit", 100, 1, MAX_PAGE)
        before = self.int_arg("before", 0, 1, MAX_ID) if self.get_query_argument("before", None) is not None \
            else None
        events = self.ctx.store.audit(task_id=task, actor=actor, action=action, target=target, since=since,
                                      until=until, before_id=before, limit=limit + 1)
        more = len(events) > limit
        events = events[:limit]
        self.write_json({"events": [e.to_json() for e in events], "next": events[-1].id if more else None})


ROUTES: list[tuple[str, Any]] = [
    (r"/api/admin/audit", AuditHandler),
]
