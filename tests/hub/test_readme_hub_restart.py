"""Restarting the README's hub (and with it the tacc service it manages) keeps users' servers: the server
task keeps running, the restarted service re-adopts it, and the restarted hub finds the server again."""

from __future__ import annotations

import time

import pytest

from .conftest import HubProcess
from .test_hub_auth import TASKS, api, wait_status


def _ready(hub: HubProcess, user: str, timeout: float = 120) -> dict:
    s = hub.login(user)
    deadline = time.monotonic() + timeout
    server: dict = {}
    while time.monotonic() < deadline:
        server = s.get(f"{hub.url}/hub/api/users/{user}", timeout=30).json()["servers"].get("", {})
        if server.get("ready"):
            return server
        time.sleep(0.2)
    raise AssertionError(f"{user}'s server not ready: {server}\n{hub.log_path.read_text()[-3000:]}")


@pytest.fixture
def own_hub(tmp_path):
    h = HubProcess(tmp_path / "hub").start()
    yield h
    h.stop()


def test_a_hub_restart_keeps_the_users_server_and_its_task(own_hub: HubProcess):
    hub = own_hub
    s = hub.login("alice")
    r = s.post(f"{hub.url}/hub/api/users/alice/server", json={},
               headers={"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or ""}, timeout=60)
    assert r.status_code in (201, 202), r.text
    _ready(hub, "alice")
    token = hub.token("alice", [*TASKS, "access:servers!user=alice"])
    (task,) = [t for t in api(hub, token, "GET", "/api/tasks?state=running").json()["tasks"]
               if t["name"] == "jupyter-alice"]

    hub.proc.terminate()  # the hub, its proxy and the tacc service stop; the server does not
    hub.proc.wait(30)
    hub._sessions.clear()
    hub.start()

    _ready(hub, "alice", timeout=60)
    assert api(hub, token, "GET", f"/api/tasks/{task['id']}").json()["status"] == "running"
    r = hub.login("alice").get(f"{hub.url}/user/alice/tacc/api/tasks", headers={"Authorization": f"token {token}"},
                               timeout=30)
    assert r.status_code == 200 and task["id"] in [t["id"] for t in r.json()["tasks"]]
    hub.stop_servers()
    assert wait_status(hub, token, task["id"], {"cancelled", "succeeded", "failed"})["status"] == "cancelled"
