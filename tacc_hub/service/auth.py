"""Who is calling: the service's own API tokens (standalone mode, and robots in hub mode).

Invariants: only the sha256 of a token is stored; lookups are cached briefly
in memory (``ttl`` seconds) so that authentication costs no database query
on the hot path; user names are validated before a token is made. Every
authenticator answers ``authenticate(handler)`` with an :class:`Identity` or
raises :class:`Denied` (401: nobody identified; 403: identified, not allowed);
hub mode (:mod:`tacc_hub.service.hubauth`) is the other implementation.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from typing import Protocol

import tornado.web

from tacc_hub.store import Store

USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token(store: Store, user: str, *, admin: bool = False, note: str | None = None) -> str:
    if not USER_RE.match(user):
        raise ValueError(f"invalid user name {user!r}: letters, digits, '.', '_', '@', '-' (at most 64)")
    token = secrets.token_urlsafe(32)
    store.add_token(user, admin, hash_token(token), note)
    return token


@dataclass(frozen=True)
class Identity:
    user: str
    admin: bool
    via: str = "token"  # token (ours), hub-token or hub-cookie


class Denied(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Authenticator(Protocol):
    async def authenticate(self, handler: tornado.web.RequestHandler) -> Identity: ...


def request_token(handler: tornado.web.RequestHandler) -> str | None:
    """``Authorization: token T`` (or ``Bearer T``), else ``?token=T`` (log streams opened by a browser)."""
    auth = handler.request.headers.get("Authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() in ("token", "bearer") and value:
        return value.strip()
    return handler.get_query_argument("token", None)


class TokenAuth:
    def __init__(self, store: Store, ttl: float = 30.0) -> None:
        self.store = store
        self.ttl = ttl
        self._cache: dict[str, tuple[float, tuple[str, bool] | None]] = {}

    def identify(self, token: str | None) -> tuple[str, bool] | None:
        if not token or len(token) > 512:
            return None
        key = hash_token(token)
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        grant = self.store.lookup_token(key)
        who = None if grant is None else (grant.user, grant.admin)
        if len(self._cache) > 10000:
            self._cache.clear()
        self._cache[key] = (now, who)
        return who

    async def authenticate(self, handler: tornado.web.RequestHandler) -> Identity:
        who = self.identify(request_token(handler))
        if who is None:
            raise Denied(401, "a valid API token is required (Authorization: token TOKEN)")
        return Identity(who[0], who[1])
