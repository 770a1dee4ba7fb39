"""TaccSpawner in a real JupyterHub: start through the hub API, progress, ready behind the proxy, stop."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from tests.e2e.conftest import Api, ServiceProcess
from tests.hub.conftest import FaultProxy, SpawnerHub

pytestmark = pytest.mark.timeout(300)


def _start(hub: SpawnerHub, name: str, options: dict | None = None) -> tuple[int, list[dict]]:
    events: list[dict] = []
    r = hub.api.post(f"{hub.url}/hub/api/users/{name}", timeout=10)
    assert r.status_code in (201, 409), r.text
    r = hub.api.post(f"{hub.url}/hub/api/users/{name}/server", json=options or {}, timeout=30)
    assert r.status_code in (201, 202), r.text
    if r.status_code == 202:
        events = hub.progress(name)
    return r.status_code, events


def _task_id(hub: SpawnerHub, name: str) -> int:
    return int(hub.user(name)["servers"][""]["state"]["task_id"])


def test_a_server_is_a_task_that_starts_reports_progress_and_stops(
        spawner_hub: SpawnerHub, tacc_service: ServiceProcess) -> None:
    hub = spawner_hub
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


def test_a_failing_poll_does_not_drop_a_running_server(spawner_hub: SpawnerHub, tacc_service: ServiceProcess,
                                                        fault_proxy: FaultProxy) -> None:
    hub = spawner_hub
    _start(hub, "carol")
    hub.wait_ready("carol")
    task_id = _task_id(hub, "carol")
    for mode in ("503", "drop"):
        fault_proxy.mode = mode
        seen = len(fault_proxy.seen)
        deadline = time.monotonic() + 30
        while sum(1 for s in fault_proxy.seen[seen:] if f"/api/tasks/{task_id} {mode}" in s) < 3:
            assert time.monotonic() < deadline, fault_proxy.seen[-5:]
            time.sleep(0.2)
        server = hub.user("carol")["servers"].get("")
        assert server and server["ready"], server  # the hub polled 3 times into the outage and kept it
        assert hub.api.get(f"{hub.url}/user/carol/api", timeout=10).status_code == 200
    fault_proxy.mode = "ok"
    assert "the tacc service has not answered for" in hub.log()
    api = Api(tacc_service.url, tacc_service.token("carol"))
    assert api.call("GET", f"/api/tasks/{task_id}")[1]["status"] == "running"
    assert hub.api.delete(f"{hub.url}/hub/api/users/carol/server", timeout=60).status_code in (202, 204)
    assert api.wait_status(task_id, {"cancelled"}, timeout=60)["status"] == "cancelled"


def test_a_start_timeout_says_where_the_task_stood_and_cancels_it(spawner_hub: SpawnerHub,
                                                                  tacc_service: ServiceProcess) -> None:
    hub = spawner_hub
    # dave holds both GPUs; tim (start_timeout 6 s) waits behind him.
    _start(hub, "dave", {"gpus": 2})
    hub.wait_ready("dave")
    _, events = _start(hub, "tim", {"gpus": 1, "time_limit": "1h"})
    messages = [e.get("message", "") for e in events]
    assert any("queued at position 1 (reason Resources" in m for m in messages), messages
    failed = events[-1]
    assert failed.get("failed") is True, events
    assert "did not start within 6 s" in failed["message"] and "still queued at position 1" in failed["message"], failed
    assert "reason Resources" in failed["message"] and "estimated start" in failed["message"], failed
    assert "The task was cancelled" in failed["message"], failed
    api = Api(tacc_service.url, tacc_service.token("tim"))
    _, tasks = api.call("GET", "/api/tasks")
    assert tasks["tasks"][0]["status"] == "cancelled", tasks
    assert hub.api.delete(f"{hub.url}/hub/api/users/dave/server", timeout=60).status_code in (202, 204)


def test_idle_gpus_stop_the_server_even_with_a_tab_open(spawner_hub: SpawnerHub, tacc_service: ServiceProcess) -> None:
    hub = spawner_hub
    _start(hub, "gina", {"gpus": 1, "time_limit": "1h"})
    hub.wait_ready("gina")
    task_id = _task_id(hub, "gina")
    stop = threading.Event()
    # The "browser": requests that count as activity for jupyter_server (/api/status would not).
    assert hub.api.get(f"{hub.url}/user/gina/api/contents", timeout=10).status_code == 200

    def keep_tab_open() -> None:
        while not stop.is_set():
            try:
                hub.api.get(f"{hub.url}/user/gina/api/contents", timeout=5)
            except Exception:
                pass
            time.sleep(0.3)

    threading.Thread(target=keep_tab_open, daemon=True).start()
    try:
        api = Api(tacc_service.url, tacc_service.token("gina"))
        final = api.wait_status(task_id, {"succeeded", "failed", "cancelled"}, timeout=60)
        assert final["status"] == "succeeded", final
        _, logs = api.call("GET", f"/api/tasks/{task_id}/logs")
        assert "tacc-server: stopping: its GPUs" in logs["data"] and "idle" in logs["data"], logs["data"][-2000:]
        deadline = time.monotonic() + 30
        while hub.user("gina")["servers"] and time.monotonic() < deadline:
            time.sleep(0.3)
        assert not hub.user("gina")["servers"], hub.user("gina")
    finally:
        stop.set()


def _run_in_kernel(hub: SpawnerHub, user: str, code: str) -> str:
    """Run ``code`` in a new kernel of the user's server (REST API and the kernel's websocket, through the
    proxy, as a browser does); its printed output."""
    import websocket

    r = hub.api.post(f"{hub.url}/user/{user}/api/kernels", json={"name": "python3"}, timeout=60)
    assert r.status_code == 201, r.text
    kid = r.json()["id"]
    ws = websocket.create_connection(f"ws://127.0.0.1:{hub.port}/user/{user}/api/kernels/{kid}/channels",
                                     header=[f"Authorization: token {hub.admin_token}"], timeout=60)
    msg_id, out = uuid.uuid4().hex, []
    try:
        ws.send(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": user,
                       "session": uuid.uuid4().hex, "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                raise AssertionError(msg["content"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)
    finally:
        ws.close()
        hub.api.delete(f"{hub.url}/user/{user}/api/kernels/{kid}", timeout=60)


def test_extra_packages_keep_jupyterlab_and_the_tacc_extension(spawner_hub: SpawnerHub,
                                                                tacc_service: ServiceProcess) -> None:
    """The form's "Extra Python packages" build the server task a venv of its own: the server still runs
    JupyterLab with the tacc extension (issue 16, bug 1), and the notebooks' kernel sees the packages."""
    hub = spawner_hub
    _start(hub, "bob", {"requirements": "termcolor==3.3.0\n# a comment\n", "time_limit": "1h"})
    hub.wait_ready("bob", timeout=120)
    task_id = _task_id(hub, "bob")
    api = Api(tacc_service.url, tacc_service.token("bob"))
    try:
        _, task = api.call("GET", f"/api/tasks/{task_id}")
        assert task["plan"]["env"]["kind"] == "venv" and task["spec"]["environment"]["requirements"] == [
            "termcolor==3.3.0"], task["plan"]["env"]
        lab = hub.api.get(f"{hub.url}/user/bob/lab", timeout=30)
        assert lab.status_code == 200, (lab.status_code, lab.text[:500])
        config = json.loads(lab.text.split('id="jupyter-config-data"', 1)[1].split(">", 1)[1].split("</script>")[0])
        assert "tacc-hub-labextension" in {e["name"] for e in config["federated_extensions"]}, config
        # the tacc server extension is loaded and answers (this hub gives servers no TACC_URL: it says so)
        ext = hub.api.get(f"{hub.url}/user/bob/tacc/api/cluster", timeout=30)
        assert ext.status_code == 200 or "the tacc_hub service" in ext.json()["message"], (ext.status_code, ext.text)
        # a notebook's kernel runs in the task's venv: the user's package, and tacc_hub for %tacc, import there
        out = _run_in_kernel(hub, "bob", "import sys, termcolor, tacc_hub.jupyter.magic\n"
                                         "from importlib.metadata import version\n"
                                         "print(version('termcolor'), sys.prefix)")
        assert out.split() == ["3.3.0", task["plan"]["env"]["path"]], out
    finally:
        assert hub.api.delete(f"{hub.url}/hub/api/users/bob/server", timeout=60).status_code in (202, 204)
        api.wait_status(task_id, {"cancelled", "succeeded", "failed"}, timeout=60)
