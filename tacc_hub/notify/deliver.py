"""Sending one notification: an e-mail over SMTP (aiosmtplib) or a webhook POST (tornado's HTTP client).

Each call either returns (delivered) or raises :class:`DeliveryError` with a short reason for the history;
the caller bounds its time. Webhooks connect through :class:`~.urlcheck.GuardedResolver`, never follow a
redirect (a redirect could lead anywhere) and count only a 2xx answer as delivered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiosmtplib
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from . import payloads
from .settings import SitePolicy
from .urlcheck import GuardedResolver


class DeliveryError(Exception):
    """A try that did not deliver; the message goes to the outbox's ``last_error``."""


@dataclass(frozen=True)
class SmtpSettings:
    host: str = ""  # empty: no e-mail
    port: int = 25
    sender: str = "tacc@localhost"
    security: str = "starttls"  # starttls | ssl | none
    user: str = ""
    password: str = ""


class Sender:
    """The I/O of delivery; one per service (its HTTP client is shared, each request has its own timeout)."""

    def __init__(self, smtp: SmtpSettings, site: SitePolicy, *, timeout: float, max_clients: int) -> None:
        self.smtp = smtp
        self.site = site
        self.timeout = timeout
        self.max_clients = max_clients
        self._http: AsyncHTTPClient | None = None  # made on the loop, at the first webhook

    @property
    def http(self) -> AsyncHTTPClient:
        if self._http is None:
            self._http = AsyncHTTPClient(force_instance=True, resolver=GuardedResolver(site=self.site),
                                         max_clients=self.max_clients)
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    async def send(self, channel: str, destination: str, payload: dict[str, Any]) -> None:
        if channel == "email":
            await self.email(destination, payload["message"])
        elif channel == "webhook":
            await self.webhook(destination, payload.get("format", "json"), payload["message"])
        else:
            raise DeliveryError(f"unknown channel {channel!r}")

    async def email(self, to: str, msg: dict[str, Any]) -> None:
        s = self.smtp
        if not s.host:
            raise DeliveryError("this site no longer sends e-mail (no SMTP server is set)")
        mail = payloads.email(msg, sender=s.sender, to=to)
        try:
            await aiosmtplib.send(mail, hostname=s.host, port=s.port, use_tls=s.security == "ssl",
                                  start_tls=True if s.security == "starttls" else False,
                                  username=s.user or None, password=s.password or None, timeout=self.timeout)
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise DeliveryError(f"SMTP {s.host}:{s.port}: {type(exc).__name__}: {exc}"[:500]) from None

    async def webhook(self, url: str, fmt: str, msg: dict[str, Any]) -> None:
        body = json.dumps(payloads.webhook_body(fmt, msg)).encode()
        req = HTTPRequest(url, method="POST", body=body, follow_redirects=False, connect_timeout=self.timeout,
                          request_timeout=self.timeout, user_agent="tacc-hub-notify/1",
                          headers={"Content-Type": "application/json"})
        try:
            resp = await self.http.fetch(req, raise_error=False)
        except Exception as exc:  # the resolver's refusal, a reset, ...
            raise DeliveryError(f"{type(exc).__name__}: {exc}"[:500]) from None
        if resp.code == 599:
            raise DeliveryError(f"no answer: {resp.error}"[:500])
        if not 200 <= resp.code < 300:
            text = (resp.body or b"")[:200].decode("utf-8", "replace")
            raise DeliveryError(f"HTTP {resp.code}: {payloads.one_line(text, 200)}")
