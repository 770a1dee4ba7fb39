"""What the store keeps for notifications: each user's settings and the outbox of deliveries.

:class:`NotifyStore` is a mixin of :class:`~tacc_hub.store.store.Store` (it uses the store's engine and
clock). A notification is written to ``notify_outbox`` as ``pending`` *before* anyone tries to deliver it,
so that a service restart loses none (pending rows are picked up at start).

Invariants:

* ``notify_settings.settings`` is JSON written here from a dict the caller validated.
* An outbox row's ``status`` is one of :data:`OUTBOX_STATUSES`: ``pending`` (``next_at``: when the next try
  is due) moves to ``sent`` (``sent_at`` set) or, after its last try, ``failed`` (``last_error`` says why);
  ``attempts`` counts the tries made.
* Each user keeps at most :data:`HISTORY_PER_USER` ended rows (sent or failed): older ones are pruned when a
  new row is written; pending rows are never pruned.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .models import CHANNEL_LEN, EVENT_LEN, NAME_LEN, notify_outbox, notify_settings

OUTBOX_STATUSES = ("pending", "sent", "failed")
HISTORY_PER_USER = 200
"""Ended deliveries (sent or failed) kept per user; older ones are pruned."""
MAX_ERROR = 500


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    user: str
    channel: str
    destination: str
    event: str
    task_id: int | None
    payload: dict[str, Any]
    status: str
    attempts: int
    next_at: float
    created_at: float
    sent_at: float | None
    last_error: str | None

    def to_json(self) -> dict[str, Any]:
        """What the user sees of a delivery (the payload stays in the store)."""
        return {"id": self.id, "channel": self.channel, "destination": self.destination, "event": self.event,
                "task_id": self.task_id, "status": self.status, "attempts": self.attempts,
                "next_at": self.next_at if self.status == "pending" else None, "created_at": self.created_at,
                "sent_at": self.sent_at, "last_error": self.last_error}


def _row(r: Any) -> OutboxRow:
    return OutboxRow(id=r.id, user=r.user, channel=r.channel, destination=r.destination, event=r.event,
                     task_id=r.task_id, payload=json.loads(r.payload), status=r.status, attempts=r.attempts,
                     next_at=r.next_at, created_at=r.created_at, sent_at=r.sent_at, last_error=r.last_error)


class NotifyStore:
    _engine: sa.Engine
    _clock: Callable[[], float]

    # -- settings ----------------------------------------------------------------------

    def notify_settings(self, user: str) -> dict[str, Any] | None:
        """The user's saved settings (as validated when saved), or None when they never saved any."""
        with self._engine.connect() as conn:
            raw = conn.execute(sa.select(notify_settings.c.settings)
                               .where(notify_settings.c.user == str(user))).scalar_one_or_none()
        return None if raw is None else dict(json.loads(raw))

    def set_notify_settings(self, user: str, settings: dict[str, Any]) -> None:
        """Replace the user's settings (the caller validated them)."""
        text = json.dumps(settings, sort_keys=True)
        now = self._clock()
        with self._engine.begin() as conn:
            updated = conn.execute(notify_settings.update().where(notify_settings.c.user == str(user))
                                   .values(settings=text, updated_at=now)).rowcount
            if not updated:
                conn.execute(notify_settings.insert().values(user=str(user)[:NAME_LEN], settings=text,
                                                             updated_at=now))

    # -- outbox ------------------------------------------------------------------------

    def add_notifications(self, rows: Iterable[tuple[str, str, str, str, int | None, dict[str, Any]]]) -> list[int]:
        """Queue deliveries ``(user, channel, destination, event, task_id, payload)``, due now, in one
        transaction; their ids in order. Prunes each user's oldest ended rows beyond :data:`HISTORY_PER_USER`."""
        now = self._clock()
        ids: list[int] = []
        users: set[str] = set()
        with self._engine.begin() as conn:
            for user, channel, destination, event, task_id, payload in rows:
                users.add(user)
                res = conn.execute(notify_outbox.insert().values(
                    user=str(user)[:NAME_LEN], channel=str(channel)[:CHANNEL_LEN], destination=str(destination),
                    event=str(event)[:EVENT_LEN], task_id=task_id, payload=json.dumps(payload), status="pending",
                    attempts=0, next_at=now, created_at=now))
                key = res.inserted_primary_key
                assert key is not None
                ids.append(int(key[0]))
            for user in users:
                self._prune(conn, user)
        return ids

    def _prune(self, conn: sa.Connection, user: str) -> None:
        ended = notify_outbox.c.status.in_(("sent", "failed"))
        cut = conn.execute(sa.select(notify_outbox.c.id).where(notify_outbox.c.user == user, ended)
                           .order_by(notify_outbox.c.id.desc()).offset(HISTORY_PER_USER).limit(1)).scalar()
        if cut is not None:
            conn.execute(notify_outbox.delete().where(notify_outbox.c.user == user, ended,
                                                      notify_outbox.c.id <= cut))

    def due_notifications(self, now: float, limit: int = 500) -> list[OutboxRow]:
        """Pending deliveries due at ``now``, oldest due first."""
        stmt = (sa.select(notify_outbox).where(notify_outbox.c.status == "pending", notify_outbox.c.next_at <= now)
                .order_by(notify_outbox.c.next_at, notify_outbox.c.id).limit(limit))
        with self._engine.connect() as conn:
            return [_row(r) for r in conn.execute(stmt)]

    def next_notification_due(self, after: float | None = None) -> float | None:
        """When the earliest pending delivery (due after ``after``, if given) is due; None: none."""
        stmt = sa.select(sa.func.min(notify_outbox.c.next_at)).where(notify_outbox.c.status == "pending")
        if after is not None:
            stmt = stmt.where(notify_outbox.c.next_at > after)
        with self._engine.connect() as conn:
            return conn.execute(stmt).scalar()

    def notification_sent(self, row_id: int, attempts: int) -> None:
        with self._engine.begin() as conn:
            conn.execute(notify_outbox.update().where(notify_outbox.c.id == int(row_id))
                         .values(status="sent", attempts=attempts, sent_at=self._clock(), last_error=None))

    def notification_failed(self, row_id: int, attempts: int, error: str, retry_at: float | None) -> None:
        """A try failed: pending again at ``retry_at``, or ``failed`` for good when that is None."""
        values: dict[str, Any] = {"attempts": attempts, "last_error": error[:MAX_ERROR]}
        if retry_at is None:
            values["status"] = "failed"
        else:
            values["next_at"] = retry_at
        with self._engine.begin() as conn:
            conn.execute(notify_outbox.update().where(notify_outbox.c.id == int(row_id)).values(**values))

    def notification_history(self, user: str, limit: int = 50) -> list[OutboxRow]:
        """The user's deliveries, newest first."""
        stmt = (sa.select(notify_outbox).where(notify_outbox.c.user == str(user))
                .order_by(notify_outbox.c.id.desc()).limit(limit))
        with self._engine.connect() as conn:
            return [_row(r) for r in conn.execute(stmt)]
