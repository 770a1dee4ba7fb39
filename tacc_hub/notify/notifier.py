"""The notifier: task events in, outbox rows written, deliveries tried in the background with backoff.

Invariants:

* The controller's listener (:meth:`Notifier.on_event`) only appends to a list and wakes the notifier's
  own task: nothing a notification does (store writes, DNS, SMTP, HTTP) runs inside a scheduling pass, and
  turning events into rows (a read per event's task) runs in a worker thread, off the event loop.
* Each notification is a ``pending`` outbox row before any try (store/notify.py), so a restart delivers
  what was pending when the service stopped; events still in memory at a clean stop are written first.
* One try at a time per destination (an e-mail address or a webhook URL): a destination that hangs or
  refuses holds back only its own rows; tries run concurrently up to ``concurrency`` and each is cut off
  after ``timeout`` seconds, so a dead endpoint holds one slot for at most that long.
* A failed try is retried after ``retry_delays[n]`` seconds (exponential by default); after the last one
  the row is ``failed``, with the last error in the user's history.
* A user gets at most ``rate_per_minute`` notifications (events, whatever the channels) a minute: the rest
  are dropped and counted, and the next one delivered says how many were dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.pool import StaticPool

from .deliver import DeliveryError, Sender, SmtpSettings
from .payloads import message
from .settings import KIND_TO_EVENT, SPEC_EVENTS, NotifySettings, SitePolicy, Webhook, email_allowed, load_settings

if TYPE_CHECKING:
    from tacc_hub.service.events import TaskEvent
    from tacc_hub.store import OutboxRow, Store, TaskRecord

log = logging.getLogger("tacc_hub.notify")


@dataclass(frozen=True)
class NotifyConfig:
    site: SitePolicy = field(default_factory=SitePolicy)
    smtp: SmtpSettings = field(default_factory=SmtpSettings)
    retry_delays: tuple[float, ...] = (30.0, 120.0, 600.0, 1800.0)
    timeout: float = 10.0
    concurrency: int = 16
    rate_per_minute: int = 20
    task_link: str = ""  # '{id}' is replaced by the task's id; empty: no link


class Notifier:
    """Turns task events into outbox rows and delivers them (see the module's invariants)."""

    def __init__(self, store: Store, config: NotifyConfig, sender: Sender | None = None) -> None:
        self.store = store
        self.config = config
        self.sender = sender or Sender(config.smtp, config.site, timeout=config.timeout,
                                       max_clients=max(1, config.concurrency) * 2)
        self._events: list[TaskEvent] = []
        engine = getattr(store, "engine", None)  # a second thread has connections of its own (not in-memory SQLite)
        self._threaded = engine is not None and not isinstance(engine.pool, StaticPool)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._busy: set[tuple[str, str]] = set()  # (channel, destination) with a try in flight
        self._tries: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(max(1, config.concurrency))
        self._recent: dict[str, deque[float]] = {}  # user -> times of their recent notifications
        self.dropped: dict[str, int] = {}  # user -> notifications dropped over the rate, not yet told
        self.dropped_total = 0
        self.tries: dict[tuple[str, str], int] = {}  # (channel, outcome) -> delivery tries: sent, retry, failed

    # -- in: events ----------------------------------------------------------------------

    def on_event(self, event: TaskEvent) -> None:
        """The controller's listener: remember the event and wake the notifier (nothing else, see above)."""
        if event.kind in KIND_TO_EVENT:
            self._events.append(event)
            self._wake.set()

    def queue_test(self, user: str) -> int:
        """Queue a test notification to each of ``user``'s channels now; how many were queued."""
        settings = load_settings(self.store.notify_settings(user))
        site = self.config.site
        emails = [settings.email] if settings.email and site.email and email_allowed(settings.email, site) else []
        hooks = list(settings.webhooks) if site.webhooks else []
        rows = self._rows(user, emails, hooks, "test", None, message("test", "test", time.time(), None))
        if rows:
            self.store.add_notifications(rows)
            self._wake.set()
        return len(rows)

    def channels(self, settings: NotifySettings, event: str, spec: dict[str, Any] | None
                 ) -> tuple[list[str], list[Webhook]]:
        """The e-mail addresses and webhooks to tell of ``event``: the user's settings, and the task's own
        ``notify:`` (its address, else the user's, for the events it lists), within what the site allows."""
        site = self.config.site
        if event not in site.events:
            return [], []
        emails: list[str] = []
        hooks: list[Webhook] = []
        if settings.wants(event):
            emails += [settings.email] if settings.email else []
            hooks += list(settings.webhooks) if site.webhooks else []
        own = (spec or {}).get("notify") or {}
        if event in {SPEC_EVENTS.get(str(e)) for e in own.get("events") or []} or \
                (event in ("failed", "cancelled") and "end" in (own.get("events") or [])):
            address = own.get("email") or settings.email
            if address and address not in emails:
                emails.append(str(address))
        if not site.email:
            return [], hooks
        return [a for a in emails if email_allowed(a, site)], hooks

    def _rows(self, user: str, emails: list[str], hooks: list[Webhook], event: str, task_id: int | None,
              msg: dict[str, Any]) -> list[tuple[str, str, str, str, int | None, dict[str, Any]]]:
        """One outbox row per channel."""
        rows: list[tuple[str, str, str, str, int | None, dict[str, Any]]] = [
            (user, "email", a, event, task_id, {"message": msg}) for a in emails]
        rows += [(user, "webhook", w.url, event, task_id, {"format": w.format, "message": msg}) for w in hooks]
        return rows

    def over_rate(self, user: str, now: float | None = None) -> bool:
        """Whether one more notification of ``user`` now is over the rate (if not, it is counted)."""
        now = time.time() if now is None else now
        recent = self._recent.setdefault(user, deque())
        while recent and recent[0] <= now - 60:
            recent.popleft()
        if len(recent) >= self.config.rate_per_minute:
            self.dropped[user] = self.dropped.get(user, 0) + 1
            self.dropped_total += 1
            if self.dropped[user] == 1:
                log.warning("notifications of %s are over the rate of %d a minute: dropping", user,
                            self.config.rate_per_minute)
            return True
        recent.append(now)
        return False

    @staticmethod
    def _task_json(rec: TaskRecord) -> dict[str, Any]:
        return {"id": rec.id, "name": rec.name, "owner": rec.owner, "state": str(rec.status), "reason": rec.reason,
                "exit_code": rec.exit_code, "submitted_at": rec.submitted_at, "started_at": rec.started_at,
                "finished_at": rec.finished_at}

    def flush(self) -> None:
        """Write the events received so far as outbox rows (one transaction)."""
        events, self._events = self._events, []
        rows: list[tuple[str, str, str, str, int | None, dict[str, Any]]] = []
        known: dict[str, NotifySettings] = {}  # each owner's settings, read once per batch
        for ev in events:
            event = KIND_TO_EVENT[ev.kind]
            try:
                rec = self.store.get(ev.task_id)
                if rec is None:
                    continue
                settings = known.get(ev.owner)
                if settings is None:
                    settings = known[ev.owner] = load_settings(self.store.notify_settings(ev.owner))
                emails, hooks = self.channels(settings, event, rec.spec)
                if not emails and not hooks:
                    continue
                if self.over_rate(ev.owner, ev.at):
                    continue
                task = self._task_json(rec)
                # the reason and exit code as of the event (a started task may have ended since)
                task["reason"] = ev.reason if ev.reason is not None else task["reason"]
                if ev.exit_code is not None:
                    task["exit_code"] = ev.exit_code
                note = None
                if self.dropped.get(ev.owner):
                    note = (f"{self.dropped.pop(ev.owner)} earlier notification(s) were dropped: more than "
                            f"{self.config.rate_per_minute} a minute")
                link = self.config.task_link.replace("{id}", str(ev.task_id)) if self.config.task_link else None
                rows += self._rows(ev.owner, emails, hooks, event, ev.task_id,
                                   message(event, ev.kind, ev.at, task, link=link, note=note))
            except Exception:
                log.exception("could not queue the notification of %s for task %s", ev.kind, ev.task_id)
        if rows:
            self.store.add_notifications(rows)

    # -- out: deliveries -----------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="notifier")

    async def stop(self) -> None:
        """Write what is still in memory, then stop trying (pending rows are tried after the next start)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for t in list(self._tries):
            t.cancel()
        if self._tries:
            await asyncio.wait(self._tries, timeout=2)
        try:
            self.flush()
        except Exception:
            log.exception("could not write the last notifications")
        self.sender.close()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            wait = 5.0
            try:
                if self._events and self._threaded:  # a read per event's task: off the loop, passes never wait
                    await asyncio.to_thread(self.flush)
                elif self._events:
                    self.flush()  # one in-memory SQLite connection (tests): not shared with a thread
                wait = self._dispatch(time.time())
            except Exception:
                log.exception("notifier pass failed")
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that arrives as the
            # event is set, and stop() would then wait for this loop forever (seen in about 1 test run in 15)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    def _dispatch(self, now: float) -> float:
        """Start a try for each due row whose destination is idle; seconds until the next one is due."""
        for row in self.store.due_notifications(now):
            key = (row.channel, row.destination)
            if key in self._busy:
                continue
            self._busy.add(key)
            t = asyncio.create_task(self._try(row, key))
            self._tries.add(t)
            t.add_done_callback(self._tries.discard)
        # rows due now wait for their destination's try to end (which wakes the loop): the next one due later
        due = self.store.next_notification_due(after=now)
        return 5.0 if due is None else max(0.05, min(5.0, due - now))

    def _count(self, channel: str, outcome: str) -> None:
        self.tries[(channel, outcome)] = self.tries.get((channel, outcome), 0) + 1

    async def _try(self, row: OutboxRow, key: tuple[str, str]) -> None:
        attempts = row.attempts + 1
        try:
            async with self._slots:
                async with asyncio.timeout(self.config.timeout + 1):
                    await self.sender.send(row.channel, row.destination, row.payload)
            self.store.notification_sent(row.id, attempts)
            self._count(row.channel, "sent")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = str(exc) if isinstance(exc, DeliveryError) else \
                f"timed out after {self.config.timeout:g} s" if isinstance(exc, TimeoutError) else \
                f"{type(exc).__name__}: {exc}"
            delays: Sequence[float] = self.config.retry_delays
            retry_at = time.time() + delays[attempts - 1] if attempts <= len(delays) else None
            log.info("notification %s to %s %s: try %d failed (%s)%s", row.id, row.channel, row.destination[:100],
                     attempts, error[:200], "" if retry_at else "; giving up")
            self._count(row.channel, "retry" if retry_at else "failed")
            try:
                self.store.notification_failed(row.id, attempts, error, retry_at)
            except Exception:
                log.exception("could not record the failed try of notification %s", row.id)
        finally:
            self._busy.discard(key)
            self._wake.set()
