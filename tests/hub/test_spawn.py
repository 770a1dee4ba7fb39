"""TaccSpawner in a real JupyterHub: start through the hub API, progress, ready behind the proxy, stop."""

from __future__ import annotations

import threading
import time

import pytest

from tests.e2e.conftest import Api, ServiceProcess
from tests.hub.conftest import FaultProxy, Hub

pytestmark = pytest.mark.timeout(300)


def _start(hub: Hub, name: str, options: dict | None = None) -> tuple[int, list[dict]]:
    events: list[dict] = []
    r = hub.api.post(f"{hub.url}/hub/api/users/{name}", timeout=10)
    assert r.status_code in (201, 409), r.text
    r = hub.api.post(f"{hub.url}/hub/api/users/{name}/server", json=options or {}, timeout=30)
    assert r.status_code in (201, 202), r.text
    if r.status_code == 202:
        events = hub.progress(name)
    return r.status_code, events


def _task_id(hub: Hub, name: str) -> int:
    return int(hub.user(name)["servers"][""]["state"]["task_id"])


def test_a_server_is_a_task_that_starts_reports_progress_and_stops(
        hub: Hub, tacc_service: ServiceProcess) -> None:
    began = time.monotonic()
    status, events = _start(hub, "alice")
    server = hub.wait_ready("alice")
    ready_s = time.monotonic() - began
    task_id = _task_id(hub, "alice")
    api = Api(tacc_service.url, tacc_service.token("alice"))
    _, task = api.call("GET", f"/api/tasks/{task_id}")
    assert task["status"] == "running" and task["owner"] == "alice", task
    assert task["name"] == "jupyter-alice" and task["spec"]["qos"]["class"] == "interactive", task
    # The hub's token for the server is nowhere in what the service shows.
    assert "JUPYTERHUB_API_TOKEN" not in str(task["spec"]) and "JUPYTERHUB_API_TOKEN" not in str(task["plan"])
    # Ready behind the real proxy: the route answers.
    r = hub.api.get(f"{hub.url}/user/alice/api", timeout=10)
    assert r.status_code == 200 and "version" in r.json(), r.text
    assert server["url"] == "/user/alice/"
    if status == 202:
        messages = [e.get("message", "") for e in events]
        assert any(m.startswith(f"Submitted task {task_id}") for m in messages), messages
        assert any(f"Task {task_id} is running" in m for m in messages), messages
        assert events[-1].get("ready") is True, events
    # Stop: the task is cancelled.
    r = hub.api.delete(f"{hub.url}/hub/api/users/alice/server", timeout=60)
    assert r.status_code in (202, 204), r.text
    final = api.wait_status(task_id, {"cancelled", "succeeded", "failed"}, timeout=60)
    assert final["status"] == "cancelled", final
    deadline = time.monotonic() + 30
    while hub.user("alice")["servers"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not hub.user("alice")["servers"]
    print(f"alice: POST to ready {ready_s:.2f} s")
