"""API token authentication: field parsing, the lookup cache (expiry, revocation here and elsewhere), where a
token may be read from, and the token endpoints on a small tornado app with a real store."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import tornado.httpclient
import tornado.httpserver
import tornado.web

from tacc_hub.service.auth import (
    MAX_EXPIRES,
    TokenAuth,
    TokenFieldError,
    check_note,
    check_user,
    hash_token,
    issue_token,
    new_token,
    parse_expires,
)
from tacc_hub.service.base import ApiHandler, ServiceContext
from tacc_hub.service.tokens import TOKEN_ROUTES
from tacc_hub.store import Store

SECRET = "SECRET-7c1e-do-not-log"


# -- parsing -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("30d", 30 * 86400), ("12h", 12 * 3600), ("90m", 5400), ("45s", 45), ("2w", 14 * 86400), ("1H", 3600),
    (3600, 3600), (0.5, 0.5), ("never", None), ("NEVER", None), (None, None), (f"{MAX_EXPIRES}s", MAX_EXPIRES),
])
def test_durations_are_parsed(text: object, seconds: float | None):
    assert parse_expires(text) == seconds


@pytest.mark.parametrize("bad", [
    "", "30", "d", "30x", "-1d", "0d", "1.5h", "1e3s", "30 d", "\uff130d", "1d2h", "9" * 13 + "s", "4000d",
    0, -5, float("nan"), float("inf"), MAX_EXPIRES + 1, True, False, [], {}, "never\n", "30d\n", " 1h", "\x00",
])
def test_bad_durations_are_refused_naming_the_field(bad: object):
    with pytest.raises(TokenFieldError) as exc:
        parse_expires(bad, field="--expires")
    assert exc.value.field == "--expires" and str(exc.value).startswith("--expires: ")


@pytest.mark.parametrize("bad", [
    "a\x1b[31mred", "line\nbreak", "tab\there", "nul\x00", "bidi \u202e evil", "zero\u200bwidth", "sep\u2028",
    "n" * 256, 42, b"bytes", ["x"],
])
def test_bad_notes_are_refused(bad: object):
    with pytest.raises(TokenFieldError) as exc:
        check_note(bad)
    assert exc.value.field == "note"


def test_notes_kept_as_given_or_none():
    assert check_note("CI bot — lab A (ünïcode ok)") == "CI bot — lab A (ünïcode ok)"
    assert check_note("n" * 255) == "n" * 255
    assert check_note("   ") is None and check_note("") is None and check_note(None) is None


@pytest.mark.parametrize("bad", ["", "-alice", "a b", "a/b", "a" * 65, "al\u00efce", "x\n", "..", 7, None])
def test_bad_user_names_are_refused(bad: object):
    with pytest.raises(TokenFieldError) as exc:
        check_user(bad)
    assert exc.value.field == "user"


# -- the cache -----------------------------------------------------------------------------------------


class Clocks:
    def __init__(self) -> None:
        self.wall = 1_000_000.0
        self.mono = 50.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


@pytest.fixture
def store(tmp_path: Path, clocks: Clocks) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tacc.db'}", clock=lambda: clocks.wall)
    s.migrate()
    yield s
    s.close()


class QueryCounter:
    def __init__(self, store: Store) -> None:
        self.statements: list[str] = []
        sa.event.listen(store.engine, "before_cursor_execute", self._on)

    def _on(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    def reset(self) -> int:
        n = len(self.statements)
        self.statements.clear()
        return n


def _auth(store: Store, clocks: Clocks, **kw: Any) -> TokenAuth:
    return TokenAuth(store, clock=lambda: clocks.wall, monotonic=lambda: clocks.mono, **kw)


def test_cached_lookups_cost_no_query(store: Store, clocks: Clocks):
    auth = _auth(store, clocks)
    tokens = [new_token(store, f"u{i}") for i in range(50)]
    queries = QueryCounter(store)
    for _ in range(40):  # ~2000 requests over 1 s with 50 tokens
        for t in tokens:
            assert auth.identify(t) is not None
        clocks.advance(1 / 40)
    # one lookup per token, and one revocation check per poll interval (0.25 s): not one query per request
    # (besides, the first use of each token records last_used_at: at most once a minute per token)
    selects = [q for q in queries.statements if q.lstrip().upper().startswith("SELECT")]
    assert len(selects) <= 50 + 1 / auth.poll + 1, len(selects)


def test_an_expired_token_is_refused_at_once_even_when_cached(store: Store, clocks: Clocks):
    auth = _auth(store, clocks)
    token, _ = issue_token(store, "ann", expires=10, clock=lambda: clocks.wall)
    assert auth.identify(token) == ("ann", False)
    clocks.advance(9.9)
    assert auth.identify(token) == ("ann", False)
    queries = QueryCounter(store)
    clocks.wall += 0.2  # past its expiry; the cache entry itself is fresh, and no revocation poll is due
    assert auth.identify(token) is None
    assert auth.identify(token) is None
    assert not [q for q in queries.statements if "token_hash" in q]  # refused from the cache's expires_at


def test_a_revocation_in_this_process_is_seen_on_the_next_request(store: Store, clocks: Clocks):
    auth = _auth(store, clocks, poll=3600)
    token, tid = issue_token(store, "ann")
    assert auth.identify(token) == ("ann", False)
    store.revoke_token(tid)
    assert auth.identify(token) == ("ann", False)  # the premise: the cache alone would still accept it
    auth.tokens_changed()
    assert auth.identify(token) is None


def test_a_revocation_by_another_process_is_seen_within_the_poll_interval(store: Store, clocks: Clocks,
                                                                          tmp_path: Path):
    auth = _auth(store, clocks)
    token, tid = issue_token(store, "ann")
    other_token = new_token(store, "bob")
    assert auth.identify(token) == ("ann", False) and auth.identify(other_token) == ("bob", False)
    cli = Store(f"sqlite:///{tmp_path / 'tacc.db'}")  # the CLI: another engine on the same database
    try:
        assert cli.revoke_token(tid) is not None
        clocks.mono += auth.poll
        assert auth.identify(token) is None
        assert auth.identify(other_token) == ("bob", False)
        assert cli.revoke_tokens("bob") == 1
        clocks.mono += auth.poll
        assert auth.identify(other_token) is None
    finally:
        cli.close()


def test_entries_are_refreshed_after_ttl_and_unknown_tokens_cached_too(store: Store, clocks: Clocks):
    auth = _auth(store, clocks, ttl=5.0)
    token = new_token(store, "ann")
    auth.identify(token)
    auth.identify("nope")
    queries = QueryCounter(store)
    auth.identify(token)
    auth.identify("nope")
    assert not [q for q in queries.statements if "token_hash" in q]
    clocks.advance(5.0)
    auth.identify(token)
    assert [q for q in queries.statements if "token_hash" in q]
    assert auth.identify("") is None and auth.identify(None) is None and auth.identify("x" * 600) is None


def test_the_cache_is_bounded(store: Store, clocks: Clocks):
    auth = _auth(store, clocks)
    auth.MAX_ENTRIES = 100
    for i in range(1000):
        auth.identify(f"guess-{i}")
    assert len(auth._cache) <= 100


def test_tokens_are_stored_by_hash_with_their_expiry(store: Store, clocks: Clocks):
    token, tid = issue_token(store, "ann", note="laptop", expires="1h", clock=lambda: clocks.wall)
    info = store.get_token(tid)
    assert info is not None and info.expires_at == clocks.wall + 3600 and info.note == "laptop"
    assert store.lookup_token(hash_token(token)) is not None and store.lookup_token(token) is None
    with pytest.raises(TokenFieldError):
        issue_token(store, "ann", expires="soon")
    assert len(store.list_tokens("ann", include_inactive=True)) == 1  # nothing stored for the refused one


# -- over HTTP: where a token is read, what is logged, the token endpoints -------------------------------


class Plain(ApiHandler):
    def get(self) -> None:
        self.write_json({"user": self.user, "admin": self.admin, "uri": self.request.uri,
                         "offset": self.get_query_argument("offset", None)})


class Stream(Plain):
    accepts_url_token = True


class Crash(ApiHandler):
    accepts_url_token = True

    def get(self) -> None:
        raise RuntimeError("boom")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    def __init__(self, url: str) -> None:
        self.url = url
        self.http = tornado.httpclient.AsyncHTTPClient()

    async def call(self, method: str, path: str, token: str | None = None, body: Any = None,
                   headers: dict[str, str] | None = None) -> tuple[int, Any]:
        hdrs = dict(headers or {})
        if token:
            hdrs["Authorization"] = f"token {token}"
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        resp = await self.http.fetch(self.url + path, method=method, headers=hdrs, body=data, raise_error=False,
                                     allow_nonstandard_methods=True, request_timeout=10)
        try:
            return resp.code, json.loads(resp.body) if resp.body else None
        except ValueError:
            return resp.code, resp.body


@contextlib.asynccontextmanager
async def serving(store: Store, auth: Any = None) -> AsyncIterator[tuple[Client, Store, Any]]:
    """The token routes and three test handlers on a real server (in the test's own event loop)."""
    auth = auth or TokenAuth(store)
    ctx = ServiceContext(store=store, controller=None, auth=auth, code_store=None,  # type: ignore[arg-type]
                         max_code_bytes=1 << 20, max_body_bytes=1 << 20, log_poll_interval=0.1)
    routes = [(r"/plain", Plain), (r"/stream", Stream), (r"/crash", Crash), *TOKEN_ROUTES]
    app = tornado.web.Application([(p, h, {"ctx": ctx}) for p, h in routes], cookie_secret="x" * 32)
    port = _free_port()
    server = tornado.httpserver.HTTPServer(app)
    server.listen(port, "127.0.0.1")
    try:
        yield Client(f"http://127.0.0.1:{port}"), store, auth
    finally:
        server.stop()


async def test_url_tokens_are_read_only_where_the_handler_accepts_them(store: Store, caplog):
    async with serving(store) as (client, store, _):
        token = new_token(store, "ann")
        code, body = await client.call("GET", f"/plain?token={token}")
        assert code == 401 and "accepted only by the log stream" in body["message"]
        assert "Authorization: token TOKEN" in body["message"]
        code, body = await client.call("GET", "/plain?token=")
        assert code == 401 and "accepted only by the log stream" in body["message"]
        code, body = await client.call("GET", "/plain")
        assert code == 401 and "log stream" not in body["message"]
        code, body = await client.call("GET", f"/plain?offset=5&token={token}", token=token)  # header: fine
        assert code == 200 and body["user"] == "ann" and body["offset"] == "5"
        assert token not in body["uri"]
        for scheme in ("token", "Bearer", "TOKEN"):
            code, _ = await client.call("GET", "/plain", headers={"Authorization": f"{scheme} {token}"})
            assert code == 200, scheme
        for bad in ("Basic " + token, token, "token", "token   ", f"tokens {token}"):
            code, _ = await client.call("GET", "/plain", headers={"Authorization": bad})
            assert code == 401, bad
        code, body = await client.call("GET", f"/stream?offset=7&token={token}")
        assert code == 200 and body["user"] == "ann" and body["offset"] == "7"
        assert body["uri"] == "/stream?offset=7"  # cut out of the request: nothing later can print it
        code, _ = await client.call("GET", "/stream?token=wrong")
        assert code == 401


async def test_a_crash_does_not_log_the_url_token(store: Store, caplog):
    async with serving(store) as (client, store, _):
        token = new_token(store, "ann")
        caplog.set_level(logging.DEBUG)
        code, _ = await client.call("GET", f"/crash?token={token}&x=kept")
        assert code == 500
        assert "boom" in caplog.text and "/crash" in caplog.text  # the premise: the crash was logged, with its path
        assert token not in caplog.text
        code, _ = await client.call("GET", f"/plain?token={SECRET}")
        assert code == 401 and SECRET not in caplog.text


async def test_token_endpoints(store: Store):
    async with serving(store) as (client, store, _):
        root = new_token(store, "root", admin=True)
        ann = new_token(store, "ann")
        bob = new_token(store, "bob")

        code, made = await client.call("POST", "/api/admin/tokens", root,
                                       {"user": "carl", "expires": "1h", "note": "ci", "admin": False})
        assert code == 201 and made["user"] == "carl" and made["state"] == "active" and made["note"] == "ci"
        assert made["expires_at"] == pytest.approx(time.time() + 3600, abs=60)
        carl = made["token"]
        code, me = await client.call("GET", "/api/tokens", carl)
        assert code == 200 and [t["id"] for t in me["tokens"]] == [made["id"]] and "token" not in me["tokens"][0]
        code, listing = await client.call("GET", "/api/admin/tokens", root)
        assert code == 200 and {t["user"] for t in listing["tokens"]} == {"root", "ann", "bob", "carl"}
        assert not any(carl in json.dumps(t) or hash_token(carl) in json.dumps(t) for t in listing["tokens"])
        code, listing = await client.call("GET", "/api/admin/tokens?user=ann", root)
        assert code == 200 and [t["user"] for t in listing["tokens"]] == ["ann"]

        # another user's token: 404, as an unknown one, and it keeps working
        ann_id = store.list_tokens("ann")[0].id
        code, _ = await client.call("DELETE", f"/api/tokens/{ann_id}", bob)
        assert code == 404
        code, _ = await client.call("GET", "/api/tokens", ann)
        assert code == 200
        # non-admins: 403 on every admin route, before anything is read or written
        for method, path, body in (("GET", "/api/admin/tokens", None), ("POST", "/api/admin/tokens", {"user": "bob"}),
                                   ("DELETE", f"/api/admin/tokens/{ann_id}", None)):
            code, _ = await client.call(method, path, bob, body)
            assert code == 403, (method, path)
        assert len(store.list_tokens("bob")) == 1 and len(store.list_tokens("ann")) == 1

        # revoke one's own: refused from the next request on
        code, gone = await client.call("DELETE", f"/api/tokens/{made['id']}", carl)
        assert code == 200 and gone["state"] == "revoked" and gone["revoked_at"] is not None
        code, _ = await client.call("GET", "/api/tokens", carl)
        assert code == 401
        # admin revoke: likewise; revoking again changes nothing
        code, gone = await client.call("DELETE", f"/api/admin/tokens/{ann_id}", root)
        assert code == 200 and gone["state"] == "revoked"
        code, _ = await client.call("GET", "/api/tokens", ann)
        assert code == 401
        code, again = await client.call("DELETE", f"/api/admin/tokens/{ann_id}", root)
        assert code == 200 and again["revoked_at"] == gone["revoked_at"]
        code, listing = await client.call("GET", "/api/admin/tokens?all=1", root)
        assert {t["state"] for t in listing["tokens"]} == {"active", "revoked"}
        code, listing = await client.call("GET", "/api/admin/tokens", root)
        assert {t["user"] for t in listing["tokens"]} == {"root", "bob"}


@pytest.mark.parametrize(("body", "field"), [
    ({"user": "a b"}, "user"), ({"user": ""}, "user"), ({"user": 5}, "user"), ({}, "user"),
    ({"user": "ann", "admin": "yes"}, "admin"), ({"user": "ann", "admin": 1}, "admin"),
    ({"user": "ann", "expires": "tomorrow"}, "expires"), ({"user": "ann", "expires": -1}, "expires"),
    ({"user": "ann", "expires": True}, "expires"), ({"user": "ann", "expires": 1e300}, "expires"),
    ({"user": "ann", "expires": [1]}, "expires"), ({"user": "ann", "note": "x\x1b]0;pwned\x07"}, "note"),
    ({"user": "ann", "note": "n" * 256}, "note"), ({"user": "ann", "note": 3}, "note"),
    ({"user": "ann", "token": "chosen"}, "token"),
])
async def test_hostile_create_bodies_are_400_naming_the_field(store: Store, body: dict, field: str):
    async with serving(store) as (client, store, _):
        root = new_token(store, "root", admin=True)
        code, resp = await client.call("POST", "/api/admin/tokens", root, body)
        assert code == 400, resp
        assert field in [e["field"] for e in resp["errors"]] or field in resp["message"], resp
        assert [t.user for t in store.list_tokens(include_inactive=True)] == ["root"]


async def test_hostile_bodies_ids_and_parameters(store: Store):
    async with serving(store) as (client, store, _):
        root = new_token(store, "root", admin=True)
        ann = new_token(store, "ann")
        for raw in (b"", b"null", b"[]", b"\"user\"", b"{", b"\xff\xfe", b'{"user": NaN}',
                    b'{"user": "ann", "expires": NaN}', b'{"user": "ann", "expires": Infinity}'):
            code, resp = await client.call("POST", "/api/admin/tokens", root, raw)
            assert code == 400, (raw, resp)
        for tid in ("0", "99999", str(2**63 - 1), str(2**63), str(2**64), "9" * 30, "9" * 5000):
            for token, path in ((root, "/api/admin/tokens/"), (ann, "/api/tokens/"), (root, "/api/tokens/")):
                code, _ = await client.call("DELETE", path + tid, token)
                assert code == 404, (path, tid[:30], code)
        for q, field in (("user=a%20b", "user"), ("user=" + "u" * 65, "user"), ("all=maybe", "all")):
            code, resp = await client.call("GET", "/api/admin/tokens?" + q, root)
            assert code == 400 and resp["errors"][0]["field"] == field, (q, resp)
        code, resp = await client.call("GET", "/api/tokens?all=2", ann)
        assert code == 400 and resp["errors"][0]["field"] == "all"
        assert len(store.list_tokens(include_inactive=True)) == 2


async def test_hub_mode_never_reads_a_url_token_outside_the_log_stream(store: Store, monkeypatch):
    """HubAuth itself reads ?token= for a request saying ``Sec-Fetch-Mode: websocket`` (any script can): not here."""
    from jupyterhub.services.auth import HubOAuth

    from tacc_hub.service.hubauth import HubModeAuth

    asked: list[str] = []

    class FakeHub(HubOAuth):
        async def _check_hub_authorization(self, url: str, api_token: str, cache_key: str, use_cache: bool = True):
            asked.append(api_token)
            return {"kind": "user", "name": "hubber", "admin": False, "scopes": ["custom:tacc:tasks"]}

    monkeypatch.setenv("JUPYTERHUB_ALLOW_TOKEN_IN_URL", "1")
    hub = FakeHub(api_url="http://127.0.0.1:1/hub/api", api_token="svc", cache_max_age=0)
    auth = HubModeAuth(TokenAuth(store), hub)
    ours = new_token(store, "ann")
    async with serving(store, auth) as (client, _, _):
        for path in ("/plain?token=hubtok", f"/plain?token={ours}"):
            code, body = await client.call("GET", path, headers={"Sec-Fetch-Mode": "websocket"})
            assert code == 401 and "accepted only by the log stream" in body["message"], body
        assert asked == []
        code, body = await client.call("GET", "/stream?token=hubtok")
        assert code == 200 and body["user"] == "hubber" and asked == ["hubtok"]
        code, body = await client.call("GET", f"/stream?token={ours}")
        assert code == 200 and body["user"] == "ann"
        code, body = await client.call("GET", "/plain?token=hubtok3", "hubtok2")
        assert code == 200 and body["user"] == "hubber" and asked == ["hubtok", "hubtok2"]
