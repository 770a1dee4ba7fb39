"""API tokens and code snapshot owners in the store: mixins of :class:`~tacc_hub.store.store.Store`.

Invariants:

* A token is stored by its sha256 only. It is *valid* while ``revoked_at`` is NULL and
  ``expires_at`` is NULL or later than the store's clock; :meth:`TokenStore.lookup_token`
  answers only valid tokens. Revoking keeps the row (who had which token, until when).
* ``last_used_at`` is rewritten at most every :data:`TOKEN_TOUCH_INTERVAL` seconds per token,
  so that authenticating a request is a read almost every time.
* A code snapshot belongs to each user who uploaded its bytes (``code_snapshots``); a second
  upload of the same bytes by the same user changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from .models import NAME_LEN, NOTE_LEN, api_tokens, code_snapshots

TOKEN_TOUCH_INTERVAL = 60.0
"""Seconds: ``api_tokens.last_used_at`` is rewritten at most this often per token."""


@dataclass(frozen=True)
class TokenGrant:
    """What a valid token lets its bearer be."""

    user: str
    admin: bool
    expires_at: float | None


@dataclass(frozen=True)
class TokenInfo:
    """One stored token as ``tacc-hub token list`` and ``GET /api/admin/tokens`` show it (never the token)."""

    id: int
    user: str
    admin: bool
    note: str | None
    created_at: float
    last_used_at: float | None
    expires_at: float | None
    revoked_at: float | None

    def state(self, now: float) -> str:
        """``active``, ``expired`` or ``revoked``."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


_INFO_COLUMNS = (api_tokens.c.id, api_tokens.c.user, api_tokens.c.admin, api_tokens.c.note, api_tokens.c.created_at,
                 api_tokens.c.last_used_at, api_tokens.c.expires_at, api_tokens.c.revoked_at)


def _info(row: Any) -> TokenInfo:
    id_, user, admin, note, created, used, expires, revoked = row
    return TokenInfo(int(id_), str(user), bool(admin), None if note is None else str(note), float(created),
                     None if used is None else float(used), None if expires is None else float(expires),
                     None if revoked is None else float(revoked))


class TokenStore:
    """Token methods of :class:`~tacc_hub.store.store.Store`."""

    _engine: sa.Engine
    _clock: Callable[[], float]

    def add_token(self, user: str, admin: bool, token_hash: str, note: str | None = None,
                  expires_at: float | None = None) -> int:
        """Store a token (by its hash only); returns its id. A duplicate hash is an IntegrityError."""
        if not user or len(user) > NAME_LEN:
            raise ValueError(f"user: must be 1 to {NAME_LEN} characters")
        if not token_hash or len(token_hash) > NAME_LEN:
            raise ValueError(f"token_hash: must be 1 to {NAME_LEN} characters")
        if note is not None and len(note) > NOTE_LEN:
            raise ValueError(f"note: longer than {NOTE_LEN} characters")
        if expires_at is not None and not math.isfinite(expires_at):
            raise ValueError("expires_at: must be a finite time")
        stmt = (
            sa.insert(api_tokens)
            .values(user=user, admin=bool(admin), token_hash=token_hash, note=note, created_at=self._clock(),
                    expires_at=expires_at)
            .returning(api_tokens.c.id)
        )
        with self._engine.begin() as conn:
            return int(conn.execute(stmt).scalar_one())

    def lookup_token(self, token_hash: str) -> TokenGrant | None:
        """What a valid token grants, or ``None`` (unknown, revoked or expired). Records the use (coarsely)."""
        with self._engine.connect() as conn:
            row = conn.execute(
                sa.select(api_tokens.c.user, api_tokens.c.admin, api_tokens.c.last_used_at, api_tokens.c.expires_at,
                          api_tokens.c.revoked_at).where(api_tokens.c.token_hash == token_hash)
            ).first()
        if row is None:
            return None
        user, admin, last_used, expires, revoked = row
        now = self._clock()
        if revoked is not None or (expires is not None and expires <= now):
            return None
        if last_used is None or now - last_used >= TOKEN_TOUCH_INTERVAL:
            with self._engine.begin() as conn:
                conn.execute(
                    sa.update(api_tokens).where(api_tokens.c.token_hash == token_hash).values(last_used_at=now)
                )
        return TokenGrant(str(user), bool(admin), None if expires is None else float(expires))

    def list_tokens(self, user: str | None = None, *, include_inactive: bool = False) -> list[TokenInfo]:
        """Tokens (of ``user``, or everyone's), oldest first; revoked and expired ones only if asked."""
        stmt = sa.select(*_INFO_COLUMNS).order_by(api_tokens.c.id)
        if user is not None:
            stmt = stmt.where(api_tokens.c.user == user)
        if not include_inactive:
            now = self._clock()
            stmt = stmt.where(api_tokens.c.revoked_at.is_(None),
                              sa.or_(api_tokens.c.expires_at.is_(None), api_tokens.c.expires_at > now))
        with self._engine.connect() as conn:
            return [_info(r) for r in conn.execute(stmt)]

    def get_token(self, token_id: int) -> TokenInfo | None:
        with self._engine.connect() as conn:
            row = conn.execute(sa.select(*_INFO_COLUMNS).where(api_tokens.c.id == token_id)).first()
        return None if row is None else _info(row)

    def revoke_token(self, token_id: int) -> TokenInfo | None:
        """Revoke one token by id (already revoked: unchanged); the token as it now stands, or None if no such id."""
        with self._engine.begin() as conn:
            conn.execute(sa.update(api_tokens).where(api_tokens.c.id == token_id, api_tokens.c.revoked_at.is_(None))
                         .values(revoked_at=self._clock()))
        return self.get_token(token_id)

    def revoke_tokens(self, user: str) -> int:
        """Revoke every token of ``user`` not revoked yet (expired ones too); returns how many."""
        with self._engine.begin() as conn:
            return conn.execute(
                sa.update(api_tokens).where(api_tokens.c.user == user, api_tokens.c.revoked_at.is_(None))
                .values(revoked_at=self._clock())
            ).rowcount


    def token_revocation_mark(self) -> tuple[int, float | None]:
        """(how many tokens are revoked, the latest revocation): it changes whenever any token is revoked, so
        a process caching tokens can notice revocations made by another process with one small query."""
        with self._engine.connect() as conn:
            count, latest = conn.execute(
                sa.select(sa.func.count(api_tokens.c.revoked_at), sa.func.max(api_tokens.c.revoked_at))).one()
        return int(count or 0), None if latest is None else float(latest)


class CodeOwnerStore:
    """Code snapshot ownership methods of :class:`~tacc_hub.store.store.Store`."""

    _engine: sa.Engine
    _clock: Callable[[], float]

    def add_code_owner(self, digest: str, user: str, size: int) -> None:
        """Record that ``user`` uploaded the snapshot ``digest`` (again: nothing changes)."""
        if len(digest) != 64 or not user or len(user) > NAME_LEN:
            raise ValueError("digest must be a sha256 and user 1 to 64 characters")
        if self.owns_code(digest, user):
            return
        try:
            with self._engine.begin() as conn:
                conn.execute(sa.insert(code_snapshots).values(digest=digest, user=user, size=int(size),
                                                              uploaded_at=self._clock()))
        except IntegrityError:
            pass  # the same user uploaded the same bytes at the same moment: one row is enough

    def owns_code(self, digest: str, user: str) -> bool:
        """Whether ``user`` uploaded ``digest``. A yes is remembered (rows are never deleted): a submit of an
        uploaded snapshot costs no query."""
        owned: set[tuple[str, str]] = self.__dict__.setdefault("_owned_code", set())
        if (digest, user) in owned:
            return True
        with self._engine.connect() as conn:
            found = conn.execute(sa.select(sa.literal(1)).where(code_snapshots.c.digest == digest,
                                                                code_snapshots.c.user == user)).first() is not None
        if found:
            if len(owned) >= 100_000:
                owned.clear()
            owned.add((digest, user))
        return found

    def code_owners(self, digest: str) -> list[str]:
        with self._engine.connect() as conn:
            return [str(u) for (u,) in conn.execute(sa.select(code_snapshots.c.user).where(
                code_snapshots.c.digest == digest).order_by(code_snapshots.c.user))]
