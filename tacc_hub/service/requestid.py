"""Request ids: every API request gets one, answered in ``X-Request-Id`` and carried by its log lines and audit rows.

The id is 16 random hex digits. An incoming ``X-Request-Id`` (set by a front proxy, or by anyone) is taken
only when it matches :data:`ACCEPTED` (8 to 32 letters, digits, ``_`` or ``-``, the first a letter or
digit): anything else, control characters, spaces, a longer text, is replaced by a fresh id, so that no
caller can put arbitrary text into a log line or an audit row through it. A caller who chooses an id that
matches only names their own request with it: the id correlates lines, it proves nothing (the audit row's
actor comes from the token).

:data:`REQUEST_ID` holds the id while the request's handler runs (a context variable: each request's
coroutine has its own, and threads started with ``asyncio.to_thread`` inherit it), so that any code the
request calls can read it with :func:`current` without having it passed along.
"""

from __future__ import annotations

import re
import secrets
from contextvars import ContextVar

HEADER = "X-Request-Id"
ACCEPTED = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{7,31}")
"""What an incoming id must be, whole (the store keeps 32 characters)."""

REQUEST_ID: ContextVar[str | None] = ContextVar("tacc_request_id", default=None)


def new_id() -> str:
    """A fresh request id: 16 hex digits (64 random bits)."""
    return secrets.token_hex(8)


def from_header(value: str | None) -> str:
    """The id of a request whose ``X-Request-Id`` header is ``value``: the header when it matches
    :data:`ACCEPTED`, else a fresh one."""
    if value is not None and ACCEPTED.fullmatch(value):
        return value
    return new_id()


def current() -> str | None:
    """The id of the request being handled, or None outside of one (the scheduler, the CLI)."""
    return REQUEST_ID.get()
