"""tacc_hub behind a real JupyterHub: the hub's OAuth for browsers, hub tokens for the CLI, our scopes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from tacc_hub.snapshot import digest_of, pack

from .conftest import HubProcess

BIN = Path(sys.executable).parent
TASKS = ["custom:tacc:tasks"]


def api(hub: HubProcess, token: str | None, method: str, path: str, **kw) -> requests.Response:
    headers = {"Authorization": f"token {token}"} if token else {}
    return requests.request(method, hub.service_url + path, headers=headers, timeout=30, **kw)


def wait_status(hub: HubProcess, token: str, tid: int, wanted: set[str], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = api(hub, token, "GET", f"/api/tasks/{tid}").json()
        if body.get("status") in wanted:
            return body
        time.sleep(0.2)
    raise AssertionError(f"task {tid} never reached {wanted}: {body}")


def submit(hub: HubProcess, token: str, entrypoint: str, name: str = "hubtask", gpus: int = 0) -> int:
    with tempfile.TemporaryDirectory() as empty:
        archive = pack(empty)
    digest = digest_of(archive)
    assert api(hub, token, "PUT", f"/api/code/{digest}", data=archive).status_code in (200, 201)
    spec = {"name": name, "entrypoint": entrypoint, "resources": {"time_limit": "5m", "gpus_per_node": gpus},
            "code": {"kind": "snapshot", "digest": digest, "size": len(archive)}}
    r = api(hub, token, "POST", "/api/tasks", json=spec)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def test_a_browser_logs_in_through_the_hubs_oauth(hub):
    s = hub.login("alice")
    r = s.get(hub.service_url + "/", timeout=30)
    assert r.status_code == 200, r.text[:300]
    hops = [h.headers.get("Location", "") for h in r.history]
    assert any("/hub/api/oauth2/authorize" in h for h in hops), hops  # sent through the hub's OAuth
    assert any("/services/tacc/oauth_callback" in h for h in hops), hops
    assert "Signed in as <b>alice</b> (user)" in r.text
    who = s.get(hub.service_url + "/api/whoami", timeout=30).json()
    assert who == {"user": "alice", "admin": False, "via": "hub-cookie"}
    # the cookie alone does not make changes (XSRF); nobody without cookie or token gets in
    r = s.post(hub.service_url + "/api/tasks/1/cancel", timeout=30)
    assert r.status_code == 403 and "X-XSRFToken" in r.json()["message"]
    r = requests.get(hub.service_url + "/api/whoami", timeout=30)
    assert r.status_code == 401 and "log in through the hub" in r.json()["message"]


def test_the_cli_works_with_a_hub_token(hub, tmp_path):
    token = hub.token("alice", TASKS, note="tcloud")
    task = tmp_path / "job"
    task.mkdir()
    (task / "tacc.yaml").write_text("name: from-cli\ncode: .\nentrypoint: python hello.py\n")
    (task / "hello.py").write_text("print('hello through the hub')\n")
    env = {**os.environ, "TACC_URL": hub.service_url, "TACC_TOKEN": token, "TACC_CONFIG": "/nonexistent"}
    res = subprocess.run([str(BIN / "tcloud"), "submit", str(task), "-f"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "hello through the hub" in res.stdout
    res = subprocess.run([str(BIN / "tcloud"), "ps", "--plain"], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0 and "from-cli" in res.stdout and "succeeded" in res.stdout, res.stdout + res.stderr


def test_users_see_only_their_own_tasks_and_hub_admins_see_all(hub):
    alice, bob = hub.token("alice", TASKS), hub.token("bob", TASKS)
    admin = hub.token("admin", TASKS)
    tid = submit(hub, alice, "sleep 60", name="alices")
    wait_status(hub, alice, tid, {"running"})
    for method, path in (("GET", f"/api/tasks/{tid}"), ("GET", f"/api/tasks/{tid}/logs"),
                         ("POST", f"/api/tasks/{tid}/cancel")):
        r = api(hub, bob, method, path)
        assert r.status_code == 404, (method, path, r.status_code, r.text)
    assert tid not in [t["id"] for t in api(hub, bob, "GET", "/api/tasks?all=1").json()["tasks"]]
    assert api(hub, bob, "GET", "/api/admin/quotas").status_code == 403

    assert api(hub, admin, "GET", "/api/whoami").json() == {"user": "admin", "admin": True, "via": "hub-token"}
    r = api(hub, admin, "GET", f"/api/tasks/{tid}")
    assert r.status_code == 200 and r.json()["owner"] == "alice"
    assert api(hub, admin, "GET", "/api/admin/quotas").status_code == 200
    assert api(hub, admin, "POST", f"/api/tasks/{tid}/cancel").status_code == 200
    assert wait_status(hub, alice, tid, {"cancelled"})["status"] == "cancelled"


def test_a_token_without_our_scopes_gets_403_and_a_bad_one_401(hub):
    plain = hub.token("alice", ["read:users:name!user"], note="no tacc scope")
    for method, path in (("GET", "/api/tasks"), ("POST", "/api/tasks"), ("GET", "/api/cluster")):
        r = api(hub, plain, method, path, json={})
        assert r.status_code == 403, (method, path, r.status_code)
        assert "custom:tacc:tasks" in r.json()["message"]
    for bad in ("not-a-token", "0" * 32):
        assert api(hub, bad, "GET", "/api/tasks").status_code == 401
    # the admin's hub token without our scopes is refused too: being a hub admin is not enough
    assert api(hub, hub.token("admin", ["read:users:name!user"]), "GET", "/api/tasks").status_code == 403


def test_logs_stream_live_through_the_hubs_proxy(hub):
    """Server-sent events pass the hub's proxy as they are written (npm's proxy; the PyPI one buffers)."""
    alice = hub.token("alice", TASKS)
    tid = submit(hub, alice, "echo first; sleep 4; echo second", name="live")
    seen: list[tuple[float, str]] = []
    with requests.get(f"{hub.service_url}/api/tasks/{tid}/logs/stream", headers={"Authorization": f"token {alice}"},
                      stream=True, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines(decode_unicode=True):
            if line and line.startswith("data:") and ("first" in line or "second" in line):
                seen.append((time.monotonic(), "first" if "first" in line else "second"))
            if len(seen) == 2:
                break
    assert [w for _, w in seen] == ["first", "second"]
    assert seen[1][0] - seen[0][0] > 2.5, seen  # "first" arrived while the task was still sleeping
