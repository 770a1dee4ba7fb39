"""API tokens for standalone mode (JupyterHub identities come through the hub later).

Invariants: only the sha256 of a token is stored; lookups are cached briefly
in memory (``ttl`` seconds) so that authentication costs no database query
on the hot path; user names are validated before a token is made.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time

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
        who = self.store.lookup_token(key)
        if len(self._cache) > 10000:
            self._cache.clear()
        self._cache[key] = (now, who)
        return who
