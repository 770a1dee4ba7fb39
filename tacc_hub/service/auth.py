"""Who is calling: the service's own API tokens (standalone mode, and robots in hub mode).

Invariants: only the sha256 of a token is stored; lookups are cached in memory so that
authentication costs no database query on the hot path, yet an expired token is refused at
once (the cache keeps each token's ``expires_at``), a token revoked through this process is
refused on the next request (:meth:`TokenAuth.tokens_changed` empties the cache) and one
revoked by another process (``tacc-hub token revoke``) within :data:`REVOCATION_POLL` seconds
plus a query (one cheap aggregate query per poll, whatever the number of tokens). A token is
read from the ``Authorization`` header; from ``?token=`` only by handlers whose class sets
``accepts_url_token`` (the SSE log stream, which a browser's EventSource opens without
headers), and the token is then cut out of the request's URI so that no log line prints it.
User names and notes are validated before a token is made. Every authenticator answers
``authenticate(handler)`` with an :class:`Identity` or raises :class:`Denied` (401: nobody
identified; 403: identified, not allowed); hub mode (:mod:`tacc_hub.service.hubauth`) is the
other implementation.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import time
import unicodedata
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import tornado.web

from tacc_hub.store import Store, TokenGrant
from tacc_hub.store.models import NOTE_LEN

USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
MAX_TOKEN_LEN = 512
REVOCATION_POLL = 0.25
"""Seconds: how often (at most) the service asks the store whether any token was revoked elsewhere."""
MAX_EXPIRES = 10 * 366 * 86400
"""Seconds: the longest finite lifetime a token can be given (about ten years); longer is ``never``."""
URL_REFUSAL = "tokens in the URL are accepted only by the log stream; send Authorization: token TOKEN"

_DURATION_RE = re.compile(r"([0-9]{1,12})([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_BAD_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Zl", "Zp"}  # controls, invisible formatting (bidi), surrogates, ...


class TokenFieldError(ValueError):
    """A token request field is invalid: ``field`` names it, ``message`` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_user(user: object, field: str = "user") -> str:
    """A user name a token may be made for (letters, digits, ``._@-``, at most 64), or TokenFieldError."""
    if not isinstance(user, str) or not USER_RE.fullmatch(user):  # fullmatch: "$" would let "ann\n" pass
        shown = repr(user)[:80]
        raise TokenFieldError(field, f"invalid user name {shown}: letters, digits, '.', '_', '@', '-' "
                                     "(at most 64, starting with a letter or digit)")
    return user


def check_note(note: object, field: str = "note") -> str | None:
    """A note as stored: None for none or empty; refused if not text, too long or with control characters."""
    if note is None:
        return None
    if not isinstance(note, str):
        raise TokenFieldError(field, "must be text")
    if len(note) > NOTE_LEN:
        raise TokenFieldError(field, f"longer than {NOTE_LEN} characters")
    for ch in note:
        if unicodedata.category(ch) in _BAD_CATEGORIES:
            raise TokenFieldError(field, f"contains the control or format character U+{ord(ch):04X}")
    return note.strip() or None


def parse_expires(value: object, field: str = "expires") -> float | None:
    """A token lifetime in seconds, or None for ``never``.

    Accepted: ``"30d"``, ``"12h"``, ``"90m"``, ``"45s"``, ``"2w"``, ``"never"``, or a number of
    seconds (> 0, at most :data:`MAX_EXPIRES`); anything else is a TokenFieldError.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise TokenFieldError(field, "must be a duration such as 30d, 12h, 90m, or never")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.lower()
        if text == "never":
            return None
        m = _DURATION_RE.fullmatch(text)
        if m is None:
            raise TokenFieldError(field, f"{value[:40]!r} is not a duration such as 30d, 12h, 90m, 45s, or never")
        seconds = float(int(m.group(1)) * _UNITS[m.group(2)])
    else:
        raise TokenFieldError(field, "must be a duration such as 30d, 12h, 90m, or never")
    if not math.isfinite(seconds) or seconds <= 0:
        raise TokenFieldError(field, "must be more than 0 seconds")
    if seconds > MAX_EXPIRES:
        raise TokenFieldError(field, f"at most {MAX_EXPIRES // 86400} days (or never)")
    return seconds


def issue_token(store: Store, user: str, *, admin: bool = False, note: str | None = None,
                expires: object = None, clock: Callable[[], float] = time.time) -> tuple[str, int]:
    """Make and store a new token; returns (the token, its id). ``expires`` as :func:`parse_expires` takes
    it. Every field is validated (TokenFieldError) before anything is stored."""
    user = check_user(user)
    note = check_note(note)
    expires_in = parse_expires(expires)
    token = secrets.token_urlsafe(32)
    expires_at = None if expires_in is None else clock() + expires_in
    return token, store.add_token(user, bool(admin), hash_token(token), note, expires_at)


def new_token(store: Store, user: str, *, admin: bool = False, note: str | None = None,
              expires: object = None) -> str:
    """A new token for ``user`` (see :func:`issue_token`)."""
    return issue_token(store, user, admin=admin, note=note, expires=expires)[0]


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


def accepts_url_token(handler: tornado.web.RequestHandler) -> bool:
    return bool(getattr(type(handler), "accepts_url_token", False))


def request_token(handler: tornado.web.RequestHandler) -> str | None:
    """``Authorization: token T`` (or ``Bearer T``); else ``?token=T``, only where the handler's class accepts it.

    A ``?token=`` is cut out of the request's URI either way (see :func:`scrub_url_token`).
    """
    auth = handler.request.headers.get("Authorization", "")
    scheme, _, value = auth.partition(" ")
    url_token = handler.get_query_argument("token", None) if accepts_url_token(handler) else None
    scrub_url_token(handler.request)
    if scheme.lower() in ("token", "bearer") and value.strip():
        return value.strip()
    return url_token or None


def url_token_ignored(handler: tornado.web.RequestHandler) -> bool:
    """The request has a ``?token=`` that this handler does not read (say so in the 401)."""
    return not accepts_url_token(handler) and "token" in handler.request.query_arguments


def scrub_url_token(request: Any) -> None:
    """Drop ``token`` from the request's URI and query, so that tornado's logs of it (``_request_summary``,
    the request's repr in a 500) never show a token; the parsed arguments other than ``token`` stay."""
    if "token" not in request.query_arguments:
        return
    kept = [(k, v) for k, v in urllib.parse.parse_qsl(request.query, keep_blank_values=True) if k != "token"]
    request.query = urllib.parse.urlencode(kept)
    request.uri = request.path + ("?" + request.query if request.query else "")
    request.query_arguments.pop("token", None)
    request.arguments.pop("token", None)


def refused_message(url_token_ignored: bool, default: str) -> str:
    """The 401 message; it says why when the request's ``?token=`` was not read."""
    return f"{default}; {URL_REFUSAL}" if url_token_ignored else default


class TokenAuth:
    """Our tokens, with a cache: ``ttl`` seconds per entry, dropped at expiry and whenever a revocation is seen."""

    MAX_ENTRIES = 10000

    def __init__(self, store: Store, ttl: float = 30.0, *, poll: float = REVOCATION_POLL,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.ttl = ttl
        self.poll = poll
        self.clock = clock  # wall time, as the store's expires_at
        self.monotonic = monotonic
        self._cache: dict[str, tuple[float, TokenGrant | None]] = {}
        self._mark: tuple[int, float | None] | None = None
        self._polled = -math.inf

    def tokens_changed(self) -> None:
        """A token was revoked (or changed) in this process: forget every cached lookup."""
        self._cache.clear()

    def _check_revocations(self, now: float) -> None:
        if now - self._polled < self.poll and now >= self._polled:
            return
        self._polled = now
        mark = self.store.token_revocation_mark()
        if mark != self._mark:
            if self._mark is not None:
                self._cache.clear()
            self._mark = mark

    def lookup(self, token: str | None) -> TokenGrant | None:
        """What ``token`` grants now, or None (absent, malformed, unknown, revoked, expired)."""
        if not token or len(token) > MAX_TOKEN_LEN:
            return None
        key = hash_token(token)
        now = self.monotonic()
        self._check_revocations(now)
        hit = self._cache.get(key)
        if hit is not None and 0 <= now - hit[0] < self.ttl:
            grant = hit[1]
        else:
            grant = self.store.lookup_token(key)
            if len(self._cache) >= self.MAX_ENTRIES:
                self._cache.clear()
            self._cache[key] = (now, grant)
        if grant is not None and grant.expires_at is not None and grant.expires_at <= self.clock():
            self._cache[key] = (now, None)
            return None
        return grant

    def identify(self, token: str | None) -> tuple[str, bool] | None:
        grant = self.lookup(token)
        return None if grant is None else (grant.user, grant.admin)

    async def authenticate(self, handler: tornado.web.RequestHandler) -> Identity:
        ignored = url_token_ignored(handler)  # before request_token cuts it out of the URI
        who = self.identify(request_token(handler))
        if who is None:
            raise Denied(401, refused_message(ignored, "a valid API token is required (Authorization: token TOKEN)"))
        return Identity(who[0], who[1])
