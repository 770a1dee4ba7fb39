"""API tokens against the real service: expiry, revocation (REST and CLI), who may list and revoke which,
URL tokens (the log stream only), and no token ever in the service's log."""

from __future__ import annotations

import json
import os
import subprocess
import time

import urllib3

from .conftest import BIN, Api, ServiceProcess, tcloud, write_task


def admin_cli(service: ServiceProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """``tacc-hub ARGS`` on the service's state (another process writing the same database)."""
    return subprocess.run([*service.run_as, str(BIN / "tacc-hub"), *args, f"--state-dir={service.state_dir}",
                           *service.db], capture_output=True, text=True, cwd=service.state_dir, timeout=60,
                          env={**os.environ, "TACC_DB_URL": ""})


def make_token(service: ServiceProcess, user: str, *extra: str) -> tuple[str, int]:
    """A fresh token of ``user`` (made by the CLI) and its id."""
    res = admin_cli(service, "token", "create", user, *extra)
    assert res.returncode == 0, res.stderr
    token = res.stdout.strip()
    _, listing = Api(service.url, service.token("root", admin=True)).call("GET", f"/api/admin/tokens?user={user}&all=1")
    return token, max(t["id"] for t in listing["tokens"])


def test_an_expired_token_is_refused_at_once(service):
    token, tid = make_token(service, "tok-exp", "--expires", "10s")
    api = Api(service.url, token)
    status, _ = api.call("GET", "/api/tasks")
    assert status == 200  # and now its lookup is cached
    _, info = Api(service.url, service.token("root", admin=True)).call("GET", "/api/admin/tokens?user=tok-exp")
    [row] = info["tokens"]
    assert row["id"] == tid and row["state"] == "active" and row["expires_at"] is not None
    while time.time() < row["expires_at"] - 0.3:
        assert api.call("GET", "/api/tasks")[0] == 200
        time.sleep(0.1)
    time.sleep(max(0.0, row["expires_at"] - time.time()) + 0.05)
    status, body = api.call("GET", "/api/tasks")
    assert status == 401, body
    _, info = Api(service.url, service.token("root", admin=True)).call("GET",
                                                                        "/api/admin/tokens?user=tok-exp&all=1")
    assert [t["state"] for t in info["tokens"]] == ["expired"]


def test_a_token_revoked_over_rest_is_refused_on_the_next_request(service):
    token, tid = make_token(service, "tok-rest")
    api = Api(service.url, token)
    assert api.call("GET", "/api/tasks")[0] == 200
    status, info = api.call("DELETE", f"/api/tokens/{tid}")  # one's own, with itself
    assert status == 200 and info["state"] == "revoked" and "token" not in info
    assert api.call("GET", "/api/tasks")[0] == 401

    token, tid = make_token(service, "tok-rest")
    api = Api(service.url, token)
    assert api.call("GET", "/api/tasks")[0] == 200
    status, info = Api(service.url, service.token("root", admin=True)).call("DELETE", f"/api/admin/tokens/{tid}")
    assert status == 200 and info["user"] == "tok-rest" and info["state"] == "revoked"
    assert api.call("GET", "/api/tasks")[0] == 401


def test_a_token_revoked_by_the_cli_is_refused_within_a_second(service):
    for how in ("id", "user"):
        token, tid = make_token(service, f"tok-cli-{how}")
        api = Api(service.url, token)
        assert api.call("GET", "/api/tasks")[0] == 200
        res = admin_cli(service, "token", "revoke", *([str(tid)] if how == "id" else ["--user", f"tok-cli-{how}"]))
        done = time.monotonic()
        assert res.returncode == 0 and "revoked" in res.stdout, res.stderr
        while api.call("GET", "/api/tasks")[0] == 200:
            assert time.monotonic() - done < 1.0, f"still accepted 1 s after `token revoke` ({how})"
            time.sleep(0.02)
        assert api.call("GET", "/api/tasks")[0] == 401


def test_users_see_and_revoke_only_their_own_tokens(service):
    ann_token, ann_id = make_token(service, "tok-ann", "--note", "ann's laptop")
    bob_token, _ = make_token(service, "tok-bob")
    ann, bob = Api(service.url, ann_token), Api(service.url, bob_token)
    status, mine = bob.call("GET", "/api/tokens?all=1")
    assert status == 200 and {t["user"] for t in mine["tokens"]} == {"tok-bob"}
    assert ann_id not in [t["id"] for t in mine["tokens"]]
    status, body = bob.call("DELETE", f"/api/tokens/{ann_id}")
    assert status == 404, body
    for method, path, body in (("GET", "/api/admin/tokens", None), ("GET", "/api/admin/tokens?user=tok-ann", None),
                               ("POST", "/api/admin/tokens", {"user": "tok-bob", "admin": True}),
                               ("DELETE", f"/api/admin/tokens/{ann_id}", None)):
        status, resp = bob.call(method, path, body)
        assert status == 403, (method, path, resp)
    status, mine = ann.call("GET", "/api/tokens")
    assert status == 200 and [(t["id"], t["note"]) for t in mine["tokens"]] == [(ann_id, "ann's laptop")]
    # admins make tokens over REST: the token is in the answer once, never in a listing
    admin = Api(service.url, service.token("root", admin=True))
    status, made = admin.call("POST", "/api/admin/tokens", {"user": "tok-bob", "expires": 3600, "note": "rest"})
    assert status == 201 and made["user"] == "tok-bob" and made["token"]
    assert Api(service.url, made["token"]).call("GET", "/api/whoami")[1]["user"] == "tok-bob"
    _, listing = admin.call("GET", "/api/admin/tokens?all=1")
    assert made["token"] not in json.dumps(listing) and bob_token not in json.dumps(listing)
    res = admin_cli(service, "token", "list", "--all")
    assert res.returncode == 0 and "tok-ann" in res.stdout and "ann's laptop" in res.stdout
    assert made["token"] not in res.stdout and ann_token not in res.stdout
    assert ann.call("GET", "/api/tasks")[0] == 200 and bob.call("GET", "/api/tasks")[0] == 200


def test_a_user_named_like_a_subcommand_gets_a_token(service):
    for name in ("list", "revoke", "create"):
        res = admin_cli(service, "token", "create", name)
        assert res.returncode == 0, res.stderr
        assert Api(service.url, res.stdout.strip()).call("GET", "/api/whoami")[1]["user"] == name
    res = admin_cli(service, "token", "tok-plain", "--admin")  # the old form still works
    assert res.returncode == 0 and Api(service.url, res.stdout.strip()).call("GET", "/api/whoami")[1]["admin"]
    refused = ((("token", "tok-x", "--expires", "5y"), "--expires"), (("token", "bad user"), "user"),
               (("token", "tok-x", "--note", "a\x1b[2J"), "note"), (("token", "revoke", "987654321"), "no token"),
               (("token", "revoke", "12x"), "not a token ID"), (("token", "list", "--user", "a/b"), "--user"))
    for args, what in refused:
        res = admin_cli(service, *args)
        assert res.returncode != 0 and what in res.stderr, (args, res.stdout, res.stderr)
    res = admin_cli(service, "token", "list", "--user", "tok-x", "--all")
    assert res.returncode == 0 and "tok-x" not in res.stdout  # nothing was made by the refused commands


def test_url_tokens_work_only_on_the_log_stream_and_are_never_logged(service, tmp_path):
    token = service.token("user7")
    d = write_task(tmp_path / "t", "name: urltok\ncode: .\nentrypoint: echo hello-from-the-task\n")
    res = tcloud(service, "user7", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    tid = json.loads(res.stdout)["id"]
    Api(service.url, token).wait_status(tid, {"succeeded"})

    anon = Api(service.url, None)
    for path in (f"/api/tasks?token={token}", f"/api/tasks/{tid}?token={token}", f"/api/tasks/{tid}/logs?token={token}",
                 f"/api/tokens?token={token}", f"/api/whoami?token={token}"):
        status, body = anon.call("GET", path)
        assert status == 401, (path, body)
        assert "accepted only by the log stream" in body["message"] and "Authorization: token" in body["message"]

    http = urllib3.PoolManager()
    r = http.request("GET", f"{service.url}/api/tasks/{tid}/logs/stream?offset=0&token={token}", timeout=30,
                     retries=False)
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    text = r.data.decode()
    assert "hello-from-the-task" in text and "event: end" in text
    r = http.request("GET", f"{service.url}/api/tasks/{tid}/logs/stream?token=not-{token}", timeout=30, retries=False)
    assert r.status == 401

    # hostile and mistaken requests that carry a token in the URL: 4xx, and the token never in the log
    secret = "SECRETtok" + "7" * 30
    for method, path in (("GET", f"/api/nope?token={secret}"), ("GET", f"/api/tasks?token={secret}"),
                         ("POST", f"/api/tasks?token={secret}"), ("GET", f"/api/admin/tokens?token={secret}"),
                         ("DELETE", f"/api/tokens/{2**64}?token={secret}"),
                         ("GET", f"/api/tasks/{tid}/logs/stream?token={secret}"),
                         ("GET", f"/api/tasks/99999999/logs/stream?token={token}&x={secret[:3]}"),
                         ("GET", f"/api/tasks/{tid}/logs/stream?offset=-1&token={token}"),
                         ("GET", f"/api/tasks/{tid}/logs/stream?token={token}&token={secret}")):
        status, _ = Api(service.url, None).call(method, path, body=b"{}")
        assert 400 <= status < 500, (method, path, status)
    status, _ = Api(service.url, token).call("GET", f"/api/tasks?token={secret}")
    assert status == 200  # the header counts; the URL one is ignored
    time.sleep(0.2)
    log = (service.state_dir / "service.log").read_text(errors="replace")
    assert "/api/tasks" in log  # the premise: requests are logged
    assert secret not in log and token not in log
    for t in service.tokens.values():
        assert t not in log
