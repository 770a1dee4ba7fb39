"""The README's hub run as root: alice's Jupyter server and her tasks run as the Unix account alice, her
notebook folder is hers alone, and bob can reach nothing of it, neither from inside his own task (a
process of the account bob) nor through the hub with his cookie.

Where the attacker stands: a task of bob's, submitted to the same service, running as bob on the same
machine, who knows every path (the data dir's layout is documented) and alice's pids (/proc lists them).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import requests

from tacc_hub.launcher.proctree import descendants
from tests import accounts

from .conftest import HubProcess
from .test_hub_auth import TASKS, api, submit, wait_status


def _ids(pid: int) -> tuple[list[int], Path]:
    """(real, effective, saved, fs uids) and cwd of a live process."""
    with open(f"/proc/{pid}/status") as fh:
        uids = next(line.split()[1:] for line in fh if line.startswith("Uid:"))
    return [int(u) for u in uids], Path(f"/proc/{pid}/cwd").resolve()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _server_ready(hub: HubProcess, user: str) -> None:
    s = hub.login(user)
    r = s.post(f"{hub.url}/hub/api/users/{user}/server", json={},
               headers={"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or ""}, timeout=60)
    assert r.status_code in (201, 202, 400), r.text  # 400: already running (another test of the session)
    deadline = time.monotonic() + 120
    server: dict = {}
    while time.monotonic() < deadline:
        server = s.get(f"{hub.url}/hub/api/users/{user}", timeout=30).json()["servers"].get("", {})
        if server.get("ready"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{user}'s server not ready: {server}\n{hub.log_path.read_text()[-3000:]}")


def _log(hub: HubProcess, token: str, tid: int) -> str:
    r = api(hub, token, "GET", f"/api/tasks/{tid}/logs")
    assert r.status_code == 200, r.text
    return str(r.json()["data"])


def _stop_server(hub: HubProcess, user: str) -> None:
    s = hub.login(user)
    s.delete(f"{hub.url}/hub/api/users/{user}/server",
             headers={"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or ""}, timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and s.get(f"{hub.url}/hub/api/users/{user}", timeout=30).json()["servers"]:
        time.sleep(0.2)


def test_alices_server_and_tasks_run_as_alice_and_bob_cannot_read_her_notebooks(hub: HubProcess):
    _server_ready(hub, "alice")
    try:
        _check(hub)
    finally:
        _stop_server(hub, "alice")  # the session's hub as the other tests expect it


def _check(hub: HubProcess) -> None:
    alice_uid, bob_uid = accounts.uid("alice"), accounts.uid("bob")
    alice = hub.token("alice", [*TASKS, "access:servers!user=alice"], note="identity test")
    bob = hub.token("bob", TASKS, note="identity test")
    (listed,) = [t for t in api(hub, alice, "GET", "/api/tasks?state=running").json()["tasks"]
                 if t["name"] == "jupyter-alice"]
    server_task = api(hub, alice, "GET", f"/api/tasks/{listed['id']}").json()

    # every process of her server runs as alice, in her folder <data_dir>/users/alice (hers, 0700)
    supervisor = json.loads((hub.state_dir / "run" / str(server_task["id"]) / "supervisor.json").read_text())
    procs = descendants(int(supervisor["pid"]))
    assert procs, "the server task has no process"
    assert all(_ids(p)[0] == [alice_uid] * 4 for p in procs), [(p, _ids(p)[0], _cmdline(p)) for p in procs]
    userdir = (hub.data_dir / "users" / "alice").resolve()
    jupyter = [p for p in procs if "jupyter" in _cmdline(p) or "jupyterhub" in _cmdline(p)]
    assert jupyter and any(_ids(p)[1] == userdir for p in jupyter), [(p, _cmdline(p), _ids(p)[1]) for p in procs]
    st = userdir.stat()
    assert (st.st_uid, st.st_mode & 0o777) == (alice_uid, 0o700)
    tdir = hub.data_dir / "tasks" / str(server_task["id"])
    assert (tdir.stat().st_uid, tdir.stat().st_mode & 0o777) == (alice_uid, 0o700)
    assert not (tdir / "work" / ".tacc-server.json").exists()  # the hub token's file: read, then removed

    # a notebook of hers, written through her server: a file of the account alice
    secret = f"SECRET-{uuid.uuid4().hex}"
    name = f"private-{uuid.uuid4().hex[:8]}.ipynb"
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": secret, "id": "c1"}], "metadata": {},
          "nbformat": 4, "nbformat_minor": 5}
    r = requests.put(f"{hub.url}/user/alice/api/contents/{name}", json={"type": "notebook", "content": nb},
                     headers={"Authorization": f"token {alice}"}, timeout=30)
    assert r.status_code in (200, 201), r.text
    notebook = userdir / name
    assert secret in notebook.read_text() and notebook.stat().st_uid == alice_uid

    # the server's hub token lands readable by alice alone: her own task on the server's snapshot sees the file
    spec = {"name": "token-file", "entrypoint": "id -un; stat -c '%U %a' .tacc-server.json",
            "resources": {"time_limit": "5m", "gpus_per_node": 0}, "code": server_task["spec"]["code"]}
    r = api(hub, alice, "POST", "/api/tasks", json=spec)
    assert r.status_code == 201, r.text
    token_task = int(r.json()["id"])
    assert wait_status(hub, alice, token_task, {"succeeded", "failed"})["status"] == "succeeded"
    assert _log(hub, alice, token_task).split() == ["alice", "alice", "600"]
    token_file = hub.data_dir / "tasks" / str(token_task) / "work" / ".tacc-server.json"
    assert token_file.stat().st_uid == alice_uid

    # bob, from inside his own task: every attempt on alice's files and processes fails
    server_pid = jupyter[0]
    attempts = {
        "notebook": f"cat {notebook}",
        "folder": f"ls {userdir}",
        "server-log": f"cat {tdir / 'output.log'}",
        "token-file": f"cat {token_file}",
        "environ": f"cat /proc/{server_pid}/environ",
        "signal": f"kill -0 {server_pid}",
    }
    script = "id -un\n" + "".join(  # the entrypoint runs under `set -e`: each status is caught
        f"rc=0; {cmd} >/dev/null 2>err.txt || rc=$?; echo \"{key} $rc $(head -c 200 err.txt)\"\n"
        for key, cmd in attempts.items())
    attack = submit(hub, bob, script, name="bob-reads-alice")
    done = wait_status(hub, bob, attack, {"succeeded", "failed"})
    lines = _log(hub, bob, attack).strip().splitlines()
    assert done["status"] == "succeeded", (done, lines)
    assert lines[0] == "bob", lines
    results = {line.split()[0]: line for line in lines[1:]}
    assert set(results) == set(attempts), lines
    for key, line in results.items():
        rc, why = line.split(maxsplit=2)[1], line.split(maxsplit=2)[2:]
        assert rc != "0", line
        expected = "Operation not permitted" if key == "signal" else "Permission denied"
        assert why and expected in why[0], line
    assert secret not in "\n".join(lines)
    bob_dir = hub.data_dir / "tasks" / str(attack)
    assert bob_dir.stat().st_uid == bob_uid and secret not in (bob_dir / "output.log").read_text()

    # bob, through the hub with his cookie: nothing of alice's (her server, her files, her tasks' logs)
    s = hub.login("bob")
    assert s.get(hub.service_url + "/", timeout=30).status_code == 200  # the service's OAuth: its cookie for bob
    assert s.get(hub.service_url + "/api/whoami", timeout=30).json()["user"] == "bob"
    for url in (f"{hub.url}/user/alice/api/contents/{name}", f"{hub.url}/user/alice/files/{name}",
                f"{hub.url}/user/alice/lab/tree/{name}", f"{hub.url}/user/alice/tacc/api/tasks",
                f"{hub.service_url}/api/tasks/{server_task['id']}", f"{hub.service_url}/api/tasks/{token_task}/logs",
                f"{hub.service_url}/api/tasks/{token_task}/outputs", f"{hub.url}/hub/api/users/alice"):
        r = s.get(url, timeout=30)
        assert r.status_code in (403, 404), (url, r.status_code, r.text[:300])
        assert secret not in r.text and alice not in r.text, url
    listed_by_bob = s.get(f"{hub.service_url}/api/tasks", timeout=30).json()["tasks"]
    assert {t["owner"] for t in listed_by_bob} <= {"bob"}, listed_by_bob
