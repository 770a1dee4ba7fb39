"""REST routes of notification settings: ``/api/notifications`` (one's own), its test and its history.

A user reads and changes only their own settings (an admin may read another's with ``?user=``, never
change them). A ``PUT`` replaces the settings whole, validated against what the site allows
(:mod:`tacc_hub.notify.settings`); each webhook's host is resolved and judged by the SSRF rules
(:mod:`tacc_hub.notify.urlcheck`) before anything is saved; a refusal is 422 naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError

from tacc_hub.notify.settings import NotifySettings, SitePolicy, load_settings
from tacc_hub.notify.urlcheck import Refused, check_url_target
from tacc_hub.schema import SpecError

from .base import ApiError, ApiHandler

MAX_HISTORY = 200


class SiteOut(BaseModel):
    email: bool
    webhooks: bool
    events: list[str]
    formats: list[str]
    max_webhooks: int
    email_domains: list[str]
    webhook_hosts_only: list[str] | None


class NotificationsOut(BaseModel):
    user: str
    settings: NotifySettings
    site: SiteOut
    usage_url: str  # the path of the user's "My usage" page of this service (the Lab panel links it)


class DeliveryOut(BaseModel):
    id: int
    channel: str
    destination: str
    event: str
    task_id: int | None
    status: str
    attempts: int
    next_at: float | None
    created_at: float
    sent_at: float | None
    last_error: str | None


class HistoryOut(BaseModel):
    user: str
    deliveries: list[DeliveryOut]


class TestOut(BaseModel):
    queued: int


class _Base(ApiHandler):
    @property
    def site(self) -> SitePolicy:
        notifier = self.ctx.notifier
        return notifier.config.site if notifier is not None else SitePolicy(webhooks=False, events=())

    def target_user(self) -> str:
        """The caller, or with ``?user=`` another user (admins only: 403 for others)."""
        wanted = self.get_query_argument("user", None)
        if wanted is not None and wanted != self.user:
            self.require_admin()
            return wanted[:64]
        return self.user

    def answer(self, user: str) -> None:
        base = re.sub(r"api/notifications/?$", "", self.request.path)  # the service's prefix, as the browser sees it
        self.write_json({"user": user, "settings": load_settings(self.ctx.store.notify_settings(user)).model_dump(),
                         "site": self.site.to_json(), "usage_url": f"{base}usage"})


class NotificationsHandler(_Base):
    openapi = {
        "get": {"summary": "Your notification settings (defaults when you saved none) and what the site allows.",
                "params": {"user": "admin: another user's (read only)"}, "response": NotificationsOut,
                "errors": {"403": "?user= of another user without being an admin"}},
        "put": {"summary": "Replace your notification settings: e-mail address, events, webhooks (json, slack or "
                           "teams). Webhook URLs must be http(s), without user:password@, and lead to public "
                           "addresses only unless the site allows their host (docs/notifications.md).",
                "request": NotifySettings, "response": NotificationsOut},
    }

    def get(self) -> None:
        self.answer(self.target_user())

    async def put(self) -> None:
        if self.get_query_argument("user", None) not in (None, self.user):
            raise ApiError(403, "only your own notification settings can be changed")
        raw = self.body_json()
        try:
            settings = NotifySettings.model_validate(raw, context={"site": self.site})
        except ValidationError as exc:
            err = SpecError.from_validation(exc, model=NotifySettings)
            raise ApiError(422, f"invalid notification settings: {err}"[:2000], err.as_json()) from None
        for i, hook in enumerate(settings.webhooks):
            try:
                await check_url_target(hook.url, self.site)
            except Refused as exc:
                raise ApiError(422, f"invalid notification settings: webhooks[{i}].url: {exc}",
                               [{"field": f"webhooks[{i}].url", "message": str(exc)}]) from None
        self.ctx.store.set_notify_settings(self.user, settings.model_dump())
        self.answer(self.user)


class NotificationTestHandler(_Base):
    openapi = {"post": {"summary": "Queue a test notification to each of your channels (e-mail, webhooks); see "
                                   "its delivery in the history.", "response": TestOut, "status": 202,
                        "errors": {"429": "over the site's rate of notifications a minute"}}}

    def post(self) -> None:
        notifier = self.ctx.notifier
        if notifier is None:
            raise ApiError(409, "notifications are off on this site")
        if notifier.over_rate(self.user):
            raise ApiError(429, "too many notifications this minute; try again in a minute")
        self.write_json({"queued": notifier.queue_test(self.user)}, status=202)


class NotificationHistoryHandler(_Base):
    openapi = {"get": {"summary": "Your recent deliveries, newest first: channel, destination, event, task, status "
                                  "(pending, sent, failed), tries and the last error.",
                       "params": {"limit": "at most this many (1..200, default 50)",
                                  "user": "admin: another user's"},
                       "response": HistoryOut, "errors": {"403": "?user= of another user without being an admin"}}}

    def get(self) -> None:
        user = self.target_user()
        limit = self.int_arg("limit", 50, 1, MAX_HISTORY)
        rows: list[dict[str, Any]] = [r.to_json() for r in self.ctx.store.notification_history(user, limit)]
        self.write_json({"user": user, "deliveries": rows})


ROUTES: list[tuple[str, Any]] = [
    (r"/api/notifications", NotificationsHandler),
    (r"/api/notifications/test", NotificationTestHandler),
    (r"/api/notifications/history", NotificationHistoryHandler),
]
