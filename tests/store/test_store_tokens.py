"""API tokens: stored by hash, looked up, revoked per user."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tacc_hub.store import Store, TokenGrant, api_tokens
from tacc_hub.store.tokens import TOKEN_TOUCH_INTERVAL


def _last_used(store: Store, token_hash: str) -> float | None:
    with store.engine.connect() as conn:
        return conn.execute(
            sa.select(api_tokens.c.last_used_at).where(api_tokens.c.token_hash == token_hash)
        ).scalar_one()


def test_add_lookup_revoke(store: Store):
    a1 = store.add_token("ann", False, "h" * 64, note="laptop")
    a2 = store.add_token("ann", False, "h2")
    store.add_token("root", True, "r1")
    assert a1 != a2
    assert store.lookup_token("h" * 64) == TokenGrant("ann", False, None)
    assert store.lookup_token("r1") == TokenGrant("root", True, None)
    assert store.lookup_token("nope") is None
    assert store.revoke_tokens("ann") == 2
    assert store.lookup_token("h" * 64) is None and store.lookup_token("h2") is None
    assert store.revoke_tokens("ann") == 0
    assert store.lookup_token("r1") == TokenGrant("root", True, None)


def test_duplicate_hash_is_refused(store: Store):
    store.add_token("ann", False, "same")
    with pytest.raises(sa.exc.IntegrityError):
        store.add_token("bob", True, "same")
    assert store.lookup_token("same") == TokenGrant("ann", False, None)


def test_lengths_are_checked(store: Store):
    with pytest.raises(ValueError, match="user"):
        store.add_token("u" * 65, False, "h")
    with pytest.raises(ValueError, match="token_hash"):
        store.add_token("ann", False, "h" * 65)
    with pytest.raises(ValueError, match="note"):
        store.add_token("ann", False, "h", note="n" * 256)


def test_last_used_is_recorded_coarsely(db_url: str):
    now = [100.0]
    store = Store(db_url, clock=lambda: now[0])
    store.migrate()
    try:
        store.add_token("ann", False, "h")
        assert _last_used(store, "h") is None
        store.lookup_token("h")
        assert _last_used(store, "h") == 100.0
        now[0] += TOKEN_TOUCH_INTERVAL / 2
        store.lookup_token("h")
        assert _last_used(store, "h") == 100.0  # not rewritten on every request
        now[0] = 100.0 + TOKEN_TOUCH_INTERVAL
        store.lookup_token("h")
        assert _last_used(store, "h") == now[0]
    finally:
        store.close()


def test_expiry_and_revocation_by_id(db_url: str):
    now = [1000.0]
    store = Store(db_url, clock=lambda: now[0])
    store.migrate()
    try:
        short = store.add_token("ann", False, "short", note="ci", expires_at=1010.0)
        forever = store.add_token("ann", True, "forever")
        bob = store.add_token("bob", False, "bob")
        assert store.lookup_token("short") == TokenGrant("ann", False, 1010.0)
        now[0] = 1010.0  # expiry is exclusive: at expires_at the token is no longer valid
        assert store.lookup_token("short") is None
        assert [t.id for t in store.list_tokens("ann")] == [forever]
        assert [t.id for t in store.list_tokens()] == [forever, bob]
        infos = store.list_tokens("ann", include_inactive=True)
        assert [(t.id, t.state(now[0]), t.note) for t in infos] == [(short, "expired", "ci"), (forever, "active", None)]

        now[0] = 1020.0
        gone = store.revoke_token(forever)
        assert gone is not None and gone.revoked_at == 1020.0 and gone.state(now[0]) == "revoked"
        assert store.lookup_token("forever") is None
        now[0] = 1030.0
        again = store.revoke_token(forever)
        assert again is not None and again.revoked_at == 1020.0  # the first revocation stands
        assert store.revoke_token(987654) is None and store.get_token(987654) is None
        assert store.revoke_tokens("ann") == 1  # the expired one (still unrevoked); not the revoked one again
        assert store.lookup_token("bob") == TokenGrant("bob", False, None)
        assert store.get_token(bob) is not None and store.get_token(bob).state(now[0]) == "active"
    finally:
        store.close()


def test_non_finite_expiry_is_refused(store: Store):
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="expires_at"):
            store.add_token("ann", False, "h", expires_at=bad)
    assert store.list_tokens(include_inactive=True) == []
