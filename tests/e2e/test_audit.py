"""The audit trail against a real service: every admin action, done through the real API (or the tacc-hub CLI),
is one row, seen alike in ``GET /api/admin/audit`` and ``tacc-hub audit --json``, with the right actor, target,
before, after and the request's own id (its X-Request-Id answer).

The attacks come from where an attacker stands: a user's token on the audit API (403) and on admin endpoints
(nothing recorded), hostile query values (400 naming the parameter), hostile X-Request-Id headers (replaced
by a fresh id), control characters in what a user can put in a row (kept as data, escaped by the CLI), and
refused actions (no row). A token's secret is in no row.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import urllib3
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from .conftest import BIN, ROOT, Api, ServiceProcess
from .groups_util import TERMINAL, cancel_and_wait, upload_code, wait_array

HEX16 = re.compile(r"[0-9a-f]{16}")
ADMIN = "root"  # the admin token's user
CLI_ACTOR = "cli:root"  # the tests run as root


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A service of this module's own, so that its audit trail holds only what these tests did."""
    s = ServiceProcess(tmp_path_factory.mktemp("audit-svc"), "--gpus=2", "--TaccHub.grace_period=2").start()
    yield s
    s.stop()


def call(svc: ServiceProcess, user: str | None, method: str, path: str, body: Any = None, *,
         admin: bool = False, headers: dict[str, str] | None = None) -> tuple[int, Any, str | None]:
    """(status, JSON body, X-Request-Id of the answer) of one request with ``user``'s token."""
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    if user is not None:
        hdrs["Authorization"] = f"token {svc.token(user, admin=admin)}"
    data = None if body is None else json.dumps(body).encode()
    r = urllib3.PoolManager().request(method, svc.url + path, body=data, headers=hdrs, retries=False, timeout=30)
    return r.status, json.loads(r.data) if r.data else {}, r.headers.get("X-Request-Id")


def api_events(svc: ServiceProcess, **query: Any) -> list[dict[str, Any]]:
    status, body, _ = call(svc, ADMIN, "GET", "/api/admin/audit?" + urlencode({"limit": 1000, **query}), admin=True)
    assert status == 200, body
    assert set(body) == {"events", "next"}
    return list(body["events"])


def cli(svc: ServiceProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "tacc-hub"), *args, f"--state-dir={svc.state_dir}"], capture_output=True,
                          text=True, cwd=svc.state_dir, env={**os.environ, "TACC_DB_URL": ""}, timeout=60)


def cli_events(svc: ServiceProcess, *args: str) -> list[dict[str, Any]]:
    res = cli(svc, "audit", "--json", "--limit=1000", *args)
    assert res.returncode == 0, res.stderr
    return list(json.loads(res.stdout)["events"])


def the_row(svc: ServiceProcess, rid: str | None, *, actor: str, action: str, target: str, before: Any,
            after: Any) -> dict[str, Any]:
    """The one row of request ``rid`` (None: of the CLI, the newest of its target), as both the API and the CLI
    show it, checked field by field."""
    assert rid is None or HEX16.fullmatch(rid) or rid.startswith("trace-"), rid
    rows = [e for e in api_events(svc, target=target) if rid is None or e["request_id"] == rid]
    assert rows, f"no audit row for {target} of request {rid}"
    row = rows[0]
    if rid is not None:
        assert len(rows) == 1, rows
    assert (row["actor"], row["action"], row["target"], row["before"], row["after"], row["request_id"]) == (
        actor, action, target, before, after, rid), row
    assert set(row) == {"id", "at", "actor", "action", "target", "task_id", "before", "after", "detail",
                        "request_id"}
    assert abs(row["at"] - time.time()) < 600
    assert row in cli_events(svc, "--target", target)  # the CLI reads the same row
    return row


def total(svc: ServiceProcess) -> int:
    return len(api_events(svc))


def _sleeper(code: dict[str, str], name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "code": code, "entrypoint": {"argv": ["sleep", "300"]}, "resources": {"gpus_per_node": 0},
            **extra}


def running_task(svc: ServiceProcess, user: str = "alice") -> int:
    alice = Api(svc.url, svc.token(user))
    status, body = alice.call("POST", "/api/tasks", _sleeper(upload_code(alice, {"x": "x"}), "audited"))
    assert status == 201, body
    alice.wait_status(body["id"], {"running"})
    return int(body["id"])


# --- quotas and groups -------------------------------------------------------------------------------------


def test_quota_set_replace_and_delete_are_rows_with_before_and_after(svc: ServiceProcess) -> None:
    target = "quota:user/quser"
    status, _, rid = call(svc, ADMIN, "PUT", "/api/admin/quotas/user/quser", {"max_gpus": 4}, admin=True)
    assert status == 200
    limits = {"max_gpus": 4, "guaranteed_gpus": 0, "gpu_hours": None}
    the_row(svc, rid, actor=ADMIN, action="quota_set", target=target, before=None, after=limits)

    status, _, rid = call(svc, ADMIN, "PUT", "/api/admin/quotas/user/quser", {"max_gpus": 8, "gpu_hours": 10.5},
                          admin=True)
    assert status == 200
    new = {"max_gpus": 8, "guaranteed_gpus": 0, "gpu_hours": 10.5}
    the_row(svc, rid, actor=ADMIN, action="quota_set", target=target, before=limits, after=new)

    status, _, rid = call(svc, ADMIN, "PUT", "/api/admin/quotas/group/nlp", {"max_gpus": 16, "guaranteed_gpus": 2},
                          admin=True)
    assert status == 200
    the_row(svc, rid, actor=ADMIN, action="quota_set", target="quota:group/nlp", before=None,
            after={"max_gpus": 16, "guaranteed_gpus": 2, "gpu_hours": None})

    status, _, rid = call(svc, ADMIN, "DELETE", "/api/admin/quotas/user/quser", admin=True)
    assert status == 200
    the_row(svc, rid, actor=ADMIN, action="quota_delete", target=target, before=new, after=None)
    status, _, rid = call(svc, ADMIN, "DELETE", "/api/admin/quotas/group/nlp", admin=True)
    assert status == 200
    # the table shows the change compactly
    out = cli(svc, "audit", "--target", target).stdout
    assert "quota_set" in out and "max_gpus 4->8" in out and "gpu_hours null->10.5" in out, out
    assert "quota_delete" in out and "- gpu_hours=10.5" in out, out


def test_the_quota_cli_is_audited_as_its_token_user(svc: ServiceProcess) -> None:
    env = {**os.environ, "TACC_URL": svc.url, "TACC_TOKEN": svc.token(ADMIN, admin=True),
           "TACC_CONFIG": "/nonexistent"}
    res = subprocess.run([str(BIN / "tacc-hub"), "quota", "set", "--user", "qcli", "--max-gpus", "3"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    row = api_events(svc, target="quota:user/qcli")[0]
    assert (row["actor"], row["action"], row["after"]["max_gpus"]) == (ADMIN, "quota_set", 3)
    assert HEX16.fullmatch(row["request_id"])


def test_group_membership_set_and_clear(svc: ServiceProcess) -> None:
    status, _, rid = call(svc, ADMIN, "PUT", "/api/admin/users/gina/group", {"group": "vision"}, admin=True)
    assert status == 200
    the_row(svc, rid, actor=ADMIN, action="group_set", target="user:gina", before={"group": "default"},
            after={"group": "vision"})
    status, _, rid = call(svc, ADMIN, "PUT", "/api/admin/users/gina/group", {"group": "nlp"}, admin=True)
    assert status == 200
    the_row(svc, rid, actor=ADMIN, action="group_set", target="user:gina", before={"group": "vision"},
            after={"group": "nlp"})
    status, _, rid = call(svc, ADMIN, "DELETE", "/api/admin/users/gina/group", admin=True)
    assert status == 200
    the_row(svc, rid, actor=ADMIN, action="group_clear", target="user:gina", before={"group": "nlp"},
            after={"group": "default"})


# --- cancels ----------------------------------------------------------------------------------------------


def test_an_admins_cancel_of_someone_elses_task_is_a_row_the_owners_is_not(svc: ServiceProcess) -> None:
    tid = running_task(svc)
    status, body, rid = call(svc, ADMIN, "POST", f"/api/tasks/{tid}/cancel", admin=True)
    assert status == 200, body
    row = the_row(svc, rid, actor=ADMIN, action="cancel", target=f"task:{tid}",
                  before={"status": "running", "owner": "alice"},
                  after={"status": body["status"], "owner": "alice"})
    assert row["task_id"] == tid and body["status"] in ("cancelling", "cancelled")
    Api(svc.url, svc.token("alice")).wait_status(tid, TERMINAL)

    mine = running_task(svc)
    status, _, rid = call(svc, "alice", "POST", f"/api/tasks/{mine}/cancel")
    assert status == 200
    Api(svc.url, svc.token("alice")).wait_status(mine, TERMINAL)
    assert api_events(svc, target=f"task:{mine}") == []  # a user's own cancel is no admin action


def test_an_admins_cancel_of_an_array_and_of_a_pipeline(svc: ServiceProcess) -> None:
    alice = Api(svc.url, svc.token("alice"))
    code = upload_code(alice, {"x": "x"})
    status, body = alice.call("POST", "/api/tasks", _sleeper(code, "arr", array={"range": "0-2", "max_running": 1}))
    assert status == 201, body
    aid, ids = body["array"]["id"], body["task_ids"]
    status, p = alice.call("POST", "/api/pipelines", {"name": "pipe", "steps": [
        {"name": "one", "needs": [], "spec": _sleeper(code, "one")},
        {"name": "two", "needs": ["one"], "spec": _sleeper(code, "two")}]})
    assert status == 201, p
    pids = [s["task_id"] for s in p["steps"] if s.get("task_id")]
    try:
        wait_array(alice, aid, lambda a: a["running"] == 1, what="one element running")
        alice.wait_status(pids[0], {"running"})
        status, out, rid = call(svc, ADMIN, "POST", f"/api/arrays/{aid}/cancel", admin=True)
        assert status == 200, out
        the_row(svc, rid, actor=ADMIN, action="cancel", target=f"array:{aid}",
                before={"status": "running", "owner": "alice"},
                after={"status": out["status"], "owner": "alice", "cancelled": 3})
        status, out, rid = call(svc, ADMIN, "POST", f"/api/pipelines/{p['id']}/cancel", admin=True)
        assert status == 200, out
        the_row(svc, rid, actor=ADMIN, action="cancel", target=f"pipeline:{p['id']}",
                before={"status": "running", "owner": "alice"},
                after={"status": out["status"], "owner": "alice", "cancelled": 2})
        assert out["status"] in ("running", "cancelled")  # a running step is still being cancelled, or is
    finally:
        cancel_and_wait(alice, ids + pids, [aid])


# --- tokens -----------------------------------------------------------------------------------------------


def test_tokens_made_and_revoked_through_the_api_never_show_the_secret(svc: ServiceProcess) -> None:
    status, made, rid = call(svc, ADMIN, "POST", "/api/admin/tokens", {"user": "bob", "note": "ci runner \u00fc",
                                                                       "expires": "30d"}, admin=True)
    assert status == 201, made
    target = f"token:{made['id']}"
    row = the_row(svc, rid, actor=ADMIN, action="token_create", target=target, before=None,
                  after={"user": "bob", "admin": False, "note": "ci runner \u00fc", "expires_at": made["expires_at"],
                         "state": "active"})
    status, _, rid = call(svc, ADMIN, "DELETE", f"/api/admin/tokens/{made['id']}", admin=True)
    assert status == 200
    the_row(svc, rid, actor=ADMIN, action="token_revoke", target=target, before=row["after"],
            after={**row["after"], "state": "revoked"})
    status, _, rid = call(svc, ADMIN, "DELETE", f"/api/admin/tokens/{made['id']}", admin=True)
    assert status == 200
    assert next(e["request_id"] for e in api_events(svc, target=target)) != rid  # a second revoke changes nothing

    # a user revoking their own token is recorded too, as them
    status, mine, _ = call(svc, ADMIN, "POST", "/api/admin/tokens", {"user": "bob"}, admin=True)
    bob = {"Authorization": f"token {mine['token']}"}
    r = urllib3.PoolManager().request("DELETE", f"{svc.url}/api/tokens/{mine['id']}", headers=bob, retries=False)
    assert r.status == 200
    the_row(svc, r.headers["X-Request-Id"], actor="bob", action="token_revoke", target=f"token:{mine['id']}",
            before={"user": "bob", "admin": False, "note": None, "expires_at": None, "state": "active"},
            after={"user": "bob", "admin": False, "note": None, "expires_at": None, "state": "revoked"})

    everything = json.dumps(api_events(svc)) + cli(svc, "audit", "--json", "--limit=1000").stdout
    everything += cli(svc, "audit", "--limit=1000").stdout
    assert made["token"] not in everything and mine["token"] not in everything


def test_tokens_made_and_revoked_with_the_cli_name_the_unix_user(svc: ServiceProcess) -> None:
    res = cli(svc, "token", "erin", "--note", "made by hand")
    assert res.returncode == 0, res.stderr
    secret = res.stdout.strip()
    row = next(e for e in api_events(svc, action="token_create", actor=CLI_ACTOR) if e["after"]["user"] == "erin")
    assert row["request_id"] is None and row["before"] is None
    assert row["after"] == {"user": "erin", "admin": False, "note": "made by hand", "expires_at": None,
                            "state": "active"}
    tid = row["target"].split(":")[1]
    assert cli(svc, "token", "revoke", tid).returncode == 0
    the_row(svc, None, actor=CLI_ACTOR, action="token_revoke", target=row["target"], before=row["after"],
            after={**row["after"], "state": "revoked"})

    made = [cli(svc, "token", "frank").returncode, cli(svc, "token", "frank", "--admin").returncode]
    assert made == [0, 0]
    before = len(api_events(svc, action="token_revoke"))
    assert cli(svc, "token", "revoke", "--user", "frank").returncode == 0
    rows = api_events(svc, action="token_revoke")[:len(api_events(svc, action="token_revoke")) - before]
    assert sorted((r["actor"], r["after"]["user"], r["after"]["admin"], r["after"]["state"]) for r in rows) == [
        (CLI_ACTOR, "frank", False, "revoked"), (CLI_ACTOR, "frank", True, "revoked")]
    assert secret not in cli(svc, "audit", "--json", "--limit=1000").stdout


# --- a running task: extend, exec, shell ----------------------------------------------------------------


def test_extend_exec_and_shell_carry_target_and_request_id(svc: ServiceProcess) -> None:
    tid = running_task(svc)
    try:
        status, body, rid = call(svc, ADMIN, "POST", f"/api/tasks/{tid}/extend", {"seconds": 120}, admin=True)
        assert status == 200, body
        row = next(e for e in api_events(svc, target=f"task:{tid}") if e["request_id"] == rid)
        assert (row["actor"], row["action"], row["task_id"]) == (ADMIN, "extend", tid)
        assert row["after"]["time_limit"] - row["before"]["time_limit"] == 120
        the_row(svc, rid, actor=ADMIN, action="extend", target=f"task:{tid}", before=row["before"],
                after=row["after"])

        # exec by an admin, with a well-formed X-Request-Id of a front proxy: kept
        code, headers = asyncio.run(_exec(svc, ADMIN, tid, ["true"], {"X-Request-Id": "trace-proxy-0001"}))
        assert code == 0 and headers == "trace-proxy-0001"
        row = _wait_row(svc, tid, "trace-proxy-0001")
        assert (row["actor"], row["action"], row["detail"]["argv"]) == (ADMIN, "exec", ["true"])
        the_row(svc, "trace-proxy-0001", actor=ADMIN, action="exec", target=f"task:{tid}", before=None, after=None)

        # a hostile X-Request-Id is replaced; hostile argv is kept as data and printed escaped by the CLI
        hostile = ["printf", "\x1b]52;c;cHduZWQ=\x07\x1b[2J", "\u202egnp.exe", "line\nbreak"]
        code, rid = asyncio.run(_exec(svc, "alice", tid, hostile, {"X-Request-Id": "x" * 40}))
        assert code == 0 and rid is not None and HEX16.fullmatch(rid), rid
        row = _wait_row(svc, tid, rid)
        assert (row["actor"], row["action"], row["detail"]["argv"]) == ("alice", "exec", hostile)
        table = cli(svc, "audit", "--task", str(tid)).stdout
        assert "\x1b" not in table and "\x07" not in table and "\u202e" not in table
        assert "\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J" in table and "\\u202egnp.exe" in table and "line\\nbreak" in table
        assert "exec" in table and "extend" in table and "time_limit" in table

        code, rid = asyncio.run(_exec(svc, "alice", tid, ["true"], {}, tty=True))
        row = _wait_row(svc, tid, rid)
        assert (row["actor"], row["action"], row["target"], row["detail"]["tty"]) == ("alice", "shell",
                                                                                      f"task:{tid}", True)
    finally:
        call(svc, "alice", "POST", f"/api/tasks/{tid}/cancel")
        Api(svc.url, svc.token("alice")).wait_status(tid, TERMINAL)


async def _exec(svc: ServiceProcess, user: str, tid: int, argv: list[str], headers: dict[str, str], *,
                tty: bool = False) -> tuple[int | None, str | None]:
    """Run ``argv`` in the task over the exec WebSocket; (its exit code, the upgrade's X-Request-Id)."""
    req = HTTPRequest(f"ws://127.0.0.1:{svc.port}/api/tasks/{tid}/exec",
                      headers={"Authorization": f"token {svc.token(user, admin=user == ADMIN)}", **headers})
    conn = await websocket_connect(req)
    rid = conn.headers.get("X-Request-Id")
    first: dict[str, Any] = {"argv": argv, "tty": tty}
    if tty:
        first.update(rows=24, cols=80)
    await conn.write_message(json.dumps(first))
    code = None
    while (msg := await conn.read_message()) is not None:
        if isinstance(msg, str) and "exit" in json.loads(msg):
            code = json.loads(msg)["exit"]
    return code, rid


def _wait_row(svc: ServiceProcess, tid: int, rid: str | None) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows = [e for e in api_events(svc, task=tid) if e["request_id"] == rid]
        if rows:
            return rows[0]
        time.sleep(0.1)
    raise AssertionError(f"no audit row of request {rid}")


# --- who may read it, and what cannot get in ------------------------------------------------------------


def test_a_user_gets_403_and_cannot_record_anything(svc: ServiceProcess) -> None:
    status, body, rid = call(svc, "alice", "GET", "/api/admin/audit")
    assert status == 403 and "events" not in body and HEX16.fullmatch(rid or "")
    n = total(svc)
    # every admin endpoint refuses alice, whatever she names as actor or request id: nothing is recorded
    forged = {"X-Request-Id": "forged-request-01"}
    attempts = [("PUT", "/api/admin/quotas/user/alice", {"max_gpus": 99, "actor": "root"}),
                ("DELETE", "/api/admin/quotas/user/quser", None),
                ("PUT", "/api/admin/users/alice/group", {"group": "admins"}),
                ("DELETE", "/api/admin/users/alice/group", None),
                ("POST", "/api/admin/tokens", {"user": "alice", "admin": True}),
                ("DELETE", "/api/admin/tokens/1", None)]
    for method, path, body in attempts:
        status, _, _ = call(svc, "alice", method, path, body, headers=forged)
        assert status == 403, (method, path, status)
    assert total(svc) == n
    assert all(e["request_id"] != "forged-request-01" for e in api_events(svc))


def test_a_refused_action_leaves_no_row(svc: ServiceProcess) -> None:
    ended = running_task(svc, "bob")
    call(svc, "bob", "POST", f"/api/tasks/{ended}/cancel")
    Api(svc.url, svc.token("bob")).wait_status(ended, TERMINAL)
    n = total(svc)
    refused = [("PUT", "/api/admin/quotas/user/quser", {"max_gpus": -1}, 400),
               ("PUT", "/api/admin/quotas/user/quser", {"max_gpus": 2, "guaranteed_gpus": 5}, 400),
               ("PUT", "/api/admin/quotas/user/bad%20name", {"max_gpus": 1}, 400),
               ("DELETE", "/api/admin/quotas/user/nobody-here", None, 404),
               ("PUT", "/api/admin/users/gina/group", {"group": "no spaces"}, 400),
               ("PUT", "/api/admin/users/gina/group", {"group": "nlp", "extra": 1}, 400),
               ("POST", f"/api/tasks/{ended}/cancel", None, 409),
               ("POST", "/api/admin/tokens", {"user": "bad user"}, 400),
               ("POST", "/api/admin/tokens", {"user": "bob", "note": "a\x1b]0;x\x07"}, 400),
               ("DELETE", "/api/admin/tokens/99999", None, 404)]
    for method, path, body, want in refused:
        status, out, _ = call(svc, ADMIN, method, path, body, admin=True)
        assert status == want, (method, path, status, out)
    assert total(svc) == n
    assert cli(svc, "token", "revoke", "99999").returncode == 1
    assert total(svc) == n


@pytest.mark.parametrize(("param", "value"), [
    ("limit", "0"), ("limit", "1001"), ("limit", "ten"), ("before", "-1"), ("before", "1x"), ("before", "9" * 30),
    ("task", "abc"), ("task", "0"), ("since", "yesterday"), ("since", "1e400"), ("since", "nan"),
    ("until", "2026-13-45"), ("until", "9" * 60), ("since", "7d"), ("actor", "a\x00b"), ("actor", "x" * 65),
    ("actor", ""), ("action", "drop_table"), ("target", "task:1\x1b[2J"), ("target", "t" * 129),
    ("target", "task:1\u202e"), ("actor", b"\xff\xfe"), ("action", "exec\x00"),
])
def test_hostile_query_values_are_400_naming_the_parameter(svc: ServiceProcess, param: str, value: str | bytes) -> None:
    status, body, _ = call(svc, ADMIN, "GET", "/api/admin/audit?" + urlencode({param: value}), admin=True)
    assert status == 400, body
    assert body["errors"][0]["field"] == param and param in body["message"]


def test_filters_and_pages(svc: ServiceProcess) -> None:
    for i in range(5):
        status, _, _ = call(svc, ADMIN, "PUT", "/api/admin/quotas/user/pager", {"max_gpus": i}, admin=True)
        assert status == 200
    rows = api_events(svc, target="quota:user/pager")
    assert [r["after"]["max_gpus"] for r in rows] == [4, 3, 2, 1, 0]  # newest first
    status, page, _ = call(svc, ADMIN, "GET", "/api/admin/audit?target=quota:user/pager&limit=2", admin=True)
    assert [r["id"] for r in page["events"]] == [r["id"] for r in rows[:2]] and page["next"] == rows[1]["id"]
    status, page2, _ = call(svc, ADMIN, "GET", f"/api/admin/audit?target=quota:user/pager&limit=2&before="
                            f"{page['next']}", admin=True)
    assert [r["id"] for r in page2["events"]] == [r["id"] for r in rows[2:4]]
    status, last, _ = call(svc, ADMIN, "GET", f"/api/admin/audit?target=quota:user/pager&limit=2&before="
                           f"{page2['next']}", admin=True)
    assert [r["id"] for r in last["events"]] == [rows[4]["id"]] and last["next"] is None
    at = rows[2]["at"]
    assert api_events(svc, target="quota:user/pager", since=at, until=rows[0]["at"] + 1) == rows[:3]
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert rows[0] in api_events(svc, since=day, action="quota_set", actor=ADMIN)
    assert api_events(svc, until="2000-01-01") == []
    # the CLI: the same filters, and times ago
    assert cli_events(svc, "--target", "quota:user/pager", "--since", "1h") == rows
    assert cli_events(svc, "--target", "quota:user/pager", "--limit", "2") == rows[:2]
    assert cli_events(svc, "--target", "quota:user/pager", "--since", day, "--until", "2000-01-01") == []
    res = cli(svc, "audit", "--since", "last tuesday")
    assert res.returncode == 1 and "--since" in res.stderr
    res = cli(svc, "audit", "--action", "rm -rf")
    assert res.returncode == 1 and "--action" in res.stderr


def test_every_answer_has_a_request_id_and_a_hostile_one_is_replaced(svc: ServiceProcess) -> None:
    seen = set()
    for hostile in ["x" * 33, "short", "has space in it", "semi;colon;value", "caf\u00e9-caf\u00e9-1", "../../etc/pwd",
                    "-leading-dash-1", "<script>alert(1)</script>"]:
        r = urllib3.PoolManager().request("GET", svc.url + "/api/health",
                                          headers={"X-Request-Id": hostile.encode().decode("latin-1")}, retries=False)
        rid = r.headers["X-Request-Id"]
        assert HEX16.fullmatch(rid) and rid not in seen, (hostile, rid)
        seen.add(rid)
    r = urllib3.PoolManager().request("GET", svc.url + "/api/health", headers={"X-Request-Id": "abcDEF-123_xyz"})
    assert r.headers["X-Request-Id"] == "abcDEF-123_xyz"
    r = urllib3.PoolManager().request("GET", svc.url + "/api/no/such/thing", retries=False)
    assert r.status == 404 and HEX16.fullmatch(r.headers["X-Request-Id"])
    status, _, rid = call(svc, None, "GET", "/api/tasks")
    assert status == 401 and rid is not None and HEX16.fullmatch(rid)


def test_text_log_lines_carry_the_request_id(svc: ServiceProcess) -> None:
    status, _, rid = call(svc, "alice", "GET", "/api/admin/audit")
    assert status == 403
    log = Path(svc.state_dir / "service.log")
    deadline = time.monotonic() + 10
    while f"[{rid}]: 403 GET /api/admin/audit" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert f"INFO tornado.access [{rid}]: 403 GET /api/admin/audit" in log.read_text()


# --- JSON logs ------------------------------------------------------------------------------------------


def test_json_logs_every_line_is_an_object_with_the_request_id(tmp_path: Path) -> None:
    s = ServiceProcess(tmp_path / "json-svc", "--TaccHub.log_format=json", "--log-level=DEBUG").start()
    try:
        r = urllib3.PoolManager().request("GET", s.url + "/api/health", retries=False)
        ok_rid = r.headers["X-Request-Id"]
        status, _, denied_rid = call(s, "alice", "GET", "/api/admin/audit")
        assert status == 403
        status, _, made_rid = call(s, ADMIN, "PUT", "/api/admin/quotas/group/jsonlog", {"max_gpus": 1}, admin=True)
        assert status == 200
    finally:
        s.stop()
    lines = [ln for ln in (s.state_dir / "service.log").read_text().splitlines() if ln.strip()]
    objs = []
    for ln in lines:
        obj = json.loads(ln)  # every line, the service's own and the libraries', is one JSON object
        assert isinstance(obj, dict) and {"time", "level", "logger", "message"} <= set(obj), ln
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", obj["time"]), obj
        objs.append(obj)
    assert any(o["logger"] == "TaccHub" and "listening on" in o["message"] for o in objs)
    access = {o["request_id"]: o for o in objs if o["logger"] == "tornado.access" and "request_id" in o}
    assert access[ok_rid]["status"] == 200 and access[ok_rid]["level"] == "DEBUG"
    assert access[denied_rid]["status"] == 403 and access[denied_rid]["level"] == "INFO"
    assert access[denied_rid]["path"] == "/api/admin/audit" and access[denied_rid]["method"] == "GET"
    assert "403 GET /api/admin/audit" in access[denied_rid]["message"]
    assert access[made_rid]["status"] == 200
    assert all("request_id" not in o for o in objs if "listening on" in o["message"])  # not in a request
