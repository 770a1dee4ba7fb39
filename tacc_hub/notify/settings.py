"""What a user may ask to be told, and what the site allows: the settings model and the site's policy.

A user's settings (``PUT /api/notifications``) are validated here against the site's
:class:`SitePolicy` (pydantic, with the policy as validation context), so that a refusal names the
field: the e-mail address, a webhook's URL or format, an event name, the number of webhooks. URLs are
checked for their form here (:func:`~.urlcheck.check_url_form`); where their host resolves to is checked
by the caller, at save time and again at every delivery (:mod:`.urlcheck`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from tacc_hub.schema.task import _EMAIL_RE

from .urlcheck import check_url_form

USER_EVENTS: tuple[str, ...] = ("started", "ended", "failed", "preempted", "near_limit", "cancelled")
"""The events a user can ask for, in the order they are listed."""
KIND_TO_EVENT: dict[str, str] = {
    "started": "started", "succeeded": "ended", "failed": "failed", "lost": "failed", "timeout": "failed",
    "preempted": "preempted", "requeued": "preempted", "near_limit": "near_limit", "cancelled": "cancelled",
}
"""A controller event (service/events.py) -> the user event it is told as (``submitted`` is never told)."""
SPEC_EVENTS: dict[str, str] = {"start": "started", "end": "ended", "fail": "failed", "preempt": "preempted",
                               "time_limit": "near_limit"}
"""A task spec's own ``notify.events`` (schema/task.py, from sbatch --mail-type) -> the user event; ``end``
is any outcome (ended, failed, cancelled)."""
DEFAULT_EVENTS: tuple[str, ...] = ("ended", "failed", "preempted", "near_limit")
FORMATS: tuple[str, ...] = ("json", "slack", "teams")
Format = Literal["json", "slack", "teams"]
MAX_URL = 2000


@dataclass(frozen=True)
class SitePolicy:
    """What the site allows (from the TaccHub settings ``notify_*`` and ``smtp_*``)."""

    email: bool = False  # an SMTP host is set
    webhooks: bool = True
    events: tuple[str, ...] = USER_EVENTS
    max_webhooks: int = 5
    email_domains: tuple[str, ...] = ()  # empty: any domain
    webhook_hosts: tuple[str, ...] = ()  # host or host:port patterns exempt from the address rules
    webhook_hosts_only: bool = False  # only hosts matching webhook_hosts are accepted
    own_addresses: frozenset[str] = field(default_factory=frozenset)

    def to_json(self) -> dict[str, Any]:
        return {"email": self.email, "webhooks": self.webhooks, "events": list(self.events),
                "formats": list(FORMATS), "max_webhooks": self.max_webhooks if self.webhooks else 0,
                "email_domains": list(self.email_domains),
                "webhook_hosts_only": list(self.webhook_hosts) if self.webhook_hosts_only else None}


def _site(info: ValidationInfo) -> SitePolicy:
    ctx = info.context or {}
    site = ctx.get("site")
    return site if isinstance(site, SitePolicy) else SitePolicy()


class Webhook(BaseModel):
    """One webhook: where to POST, and in which shape (json: the documented schema; slack; teams)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str = Field(max_length=MAX_URL, description="http or https URL; no user:password@.")
    format: Format = "json"

    @field_validator("url")
    @classmethod
    def _url(cls, v: str, info: ValidationInfo) -> str:
        return check_url_form(v, _site(info))


class NotifySettings(BaseModel):
    """A user's notification settings (what ``PUT /api/notifications`` takes and ``GET`` gives)."""

    model_config = ConfigDict(extra="forbid")
    email: str | None = Field(None, max_length=254, description="Address to e-mail; null: no e-mail.")
    events: list[str] = Field(default_factory=lambda: list(DEFAULT_EVENTS), max_length=len(USER_EVENTS),
                              description=f"When to tell: any of {', '.join(USER_EVENTS)}.")
    webhooks: list[Webhook] = Field(default_factory=list, max_length=50)

    @field_validator("email")
    @classmethod
    def _email(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None or v == "":
            return None
        site = _site(info)
        if not site.email:
            raise ValueError("this site sends no e-mail (no SMTP server is set)")
        if len(v) > 254 or not _EMAIL_RE.fullmatch(v):
            raise ValueError(f"{v[:80]!r} is not an e-mail address (name@example.org)")
        if not email_allowed(v, site):
            raise ValueError(f"this site sends e-mail only to {', '.join(site.email_domains)}")
        return v

    @field_validator("events")
    @classmethod
    def _events(cls, v: list[str], info: ValidationInfo) -> list[str]:
        allowed = _site(info).events
        for name in v:
            if name not in USER_EVENTS:
                raise ValueError(f"{str(name)[:40]!r} is not an event; one of {', '.join(USER_EVENTS)}")
            if name not in allowed:
                raise ValueError(f"this site does not tell {name!r}; it tells {', '.join(allowed) or 'nothing'}")
        return sorted(set(v), key=USER_EVENTS.index)

    @field_validator("webhooks")
    @classmethod
    def _webhooks(cls, v: list[Webhook], info: ValidationInfo) -> list[Webhook]:
        site = _site(info)
        if v and not site.webhooks:
            raise ValueError("this site allows no webhooks")
        if len(v) > site.max_webhooks:
            raise ValueError(f"at most {site.max_webhooks} webhooks")
        if len({w.url for w in v}) != len(v):
            raise ValueError("the same URL twice")
        return v

    def wants(self, event: str) -> bool:
        return event in self.events


def email_allowed(address: str, site: SitePolicy) -> bool:
    """Whether ``address``'s domain is one the site mails to (any, when it names none; subdomains count)."""
    domain = address.rsplit("@", 1)[-1].lower()
    return not site.email_domains or any(domain == d.lower() or domain.endswith("." + d.lower())
                                         for d in site.email_domains)


def load_settings(raw: dict[str, Any] | None) -> NotifySettings:
    """Saved settings (validated when saved) read back without the site's checks; none saved: nothing."""
    if raw is None:
        return NotifySettings(email=None, events=list(DEFAULT_EVENTS), webhooks=[])
    return NotifySettings.model_construct(
        email=raw.get("email"), events=[str(e) for e in raw.get("events", [])],
        webhooks=[Webhook.model_construct(url=str(w["url"]), format=w.get("format", "json"))
                  for w in raw.get("webhooks", [])])
