"""The README's hub as it starts: TaccSpawner by default, its hub token minted for the user, our service
in hub mode. A user's server is a tacc task; inside it, the server extension reaches the service with
the server's own hub token (it carries custom:tacc:tasks)."""

from __future__ import annotations

import time

from .conftest import HubProcess
from .test_hub_auth import TASKS, api, wait_status


def test_a_users_server_is_a_task_and_talks_to_the_service_from_inside(hub: HubProcess):
    s = hub.login("bob")
    xsrf = {"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or ""}
    began = time.monotonic()
    r = s.post(f"{hub.url}/hub/api/users/bob/server", json={}, headers=xsrf, timeout=60)
    assert r.status_code in (201, 202), r.text
    deadline = time.monotonic() + 120
    server: dict = {}
    while time.monotonic() < deadline:
        server = s.get(f"{hub.url}/hub/api/users/bob", timeout=30).json()["servers"].get("", {})
        if server.get("ready"):
            break
        assert server.get("pending") or server.get("ready"), (server, hub.log_path.read_text()[-3000:])
        time.sleep(0.2)
    assert server.get("ready"), server
    ready_s = time.monotonic() - began
    bob = hub.token("bob", [*TASKS, "access:servers!user=bob"], note="server access")
    tasks = api(hub, bob, "GET", "/api/tasks?state=running").json()["tasks"]
    (listed,) = [t for t in tasks if t["name"] == "jupyter-bob"]
    task = api(hub, bob, "GET", f"/api/tasks/{listed['id']}").json()
    assert task["owner"] == "bob" and task["spec"]["qos"]["class"] == "interactive"
    assert "JUPYTERHUB_API_TOKEN" not in str(task["spec"])
    # inside the server: the extension relays bob's own task list from the service
    r = s.get(f"{hub.url}/user/bob/tacc/api/tasks", headers={"Authorization": f"token {bob}"}, timeout=30)
    assert r.status_code == 200, r.text
    assert task["id"] in [t["id"] for t in r.json()["tasks"]]
    r = s.delete(f"{hub.url}/hub/api/users/bob/server", headers=xsrf, timeout=60)
    assert r.status_code in (202, 204), r.text
    assert wait_status(hub, bob, task["id"], {"cancelled", "succeeded", "failed"})["status"] == "cancelled"
    print(f"bob: POST to ready {ready_s:.2f} s")
