"""`./scripts/start.sh stop` stops the README's system cleanly: users' servers, tasks, the hub, its service.

The real script: start.sh (bootstrap, then the hub) in a temporary state dir on free ports; alice's
server (a tacc task) and a long task of the start.sh user running; then `start.sh stop`. Nothing that
carries the state dir may be left running, and the tasks are recorded as cancelled, not lost.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import requests

from tacc_hub.store import Store, TaskStatus

from .conftest import BIN, PASSWORD, ROOT, HubProcess


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def _carrying(state: Path) -> list[int]:
    """Live processes with the state dir in their command line or environment (what the demo started)."""
    key = str(state).encode()
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                blob = (proc / "cmdline").read_bytes() + b"\0" + (proc / "environ").read_bytes()
            except OSError:
                continue
            if key in blob and _alive(int(proc.name)):
                out.append(int(proc.name))
    return out


def _wait(what: str, check, timeout: float, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}: {log.read_text()[-3000:]}")


def test_start_sh_stop_stops_servers_tasks_and_the_hub(tmp_path):
    state = (tmp_path / "state").resolve()
    hub = HubProcess(state)  # only for its free ports and its login helper: start.sh starts the hub
    log = tmp_path / "start.log"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "TACC_STATE_DIR": str(state),
           "TACC_HUB_PORT": str(hub.port), "TACC_PORT": str(hub.service_port), "TACC_DEMO_PASSWORD": PASSWORD,
           "TACC_DEMO_USERS": "alice,bob", "TACC_DEMO_ADMINS": "admin", "TACC_DB_URL": "", "TACC_URL": "",
           "TACC_TOKEN": "", "TACC_NO_BOOTSTRAP": "1"}  # the suite's venv is made; bootstrap is fresh-check.sh's
    with log.open("wb") as out:
        proc = subprocess.Popen([str(ROOT / "scripts" / "start.sh")], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=tmp_path, start_new_session=True)
    try:
        def up() -> bool:
            try:
                return (requests.get(hub.url + "/hub/api/", timeout=2).status_code == 200
                        and requests.get(hub.service_url + "/api/health", timeout=2).status_code == 200)
            except requests.RequestException:
                return proc.poll() is not None and False
        _wait("the hub", lambda: up() or proc.poll() is not None, 600, log)
        assert proc.poll() is None, log.read_text()[-3000:]
        token = re.search(r"TACC_TOKEN=(\S+)", log.read_text()).group(1)

        # alice's server (a tacc task under TaccSpawner)
        s = hub.login("alice")
        xsrf = {"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or ""}
        r = s.post(f"{hub.url}/hub/api/users/alice/server", json={}, headers=xsrf, timeout=60)
        assert r.status_code in (201, 202), r.text
        _wait("alice's server", lambda: s.get(f"{hub.url}/hub/api/users/alice", timeout=10).json()
              ["servers"].get("", {}).get("ready"), 120, log)

        # a long task of the start.sh user, through the printed URL and token
        task = tmp_path / "long"
        task.mkdir()
        (task / "tacc.yaml").write_text("name: long\ncode: .\nentrypoint:\n  - echo $$ > pid\n  - sleep 600\n")
        sub = subprocess.run([str(BIN / "tcloud"), "submit", str(task), "--json"], capture_output=True, text=True,
                             env={**env, "TACC_URL": hub.service_url, "TACC_TOKEN": token,
                                  "TACC_CONFIG": "/nonexistent"}, timeout=120)
        assert sub.returncode == 0, sub.stderr
        tid = int(re.search(r'"id":\s*(\d+)', sub.stdout).group(1))
        pidfile = state / "tasks" / str(tid) / "work" / "pid"
        _wait("the long task", lambda: pidfile.exists() and pidfile.read_text().strip(), 60, log)
        task_pid = int(pidfile.read_text())
        before = _carrying(state)
        assert task_pid in before and proc.pid in before

        stop = subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
        assert stop.returncode == 0, stop.stderr
        assert "left running" not in stop.stderr, stop.stderr  # everything ended through the APIs and SIGTERM
        assert proc.wait(30) == 0 or proc.returncode is not None
        assert [p for p in before if _alive(p)] == []
        assert _carrying(state) == []

        store = Store(f"sqlite:///{state / 'tacc.sqlite'}")
        rec = store.get(tid)
        assert rec is not None and rec.status == TaskStatus.CANCELLED, rec
        records, _ = store.list_tasks(None, None, 100, None)
        assert len(records) >= 2  # the server's task too
        assert all(r.status in (TaskStatus.CANCELLED, TaskStatus.SUCCEEDED) for r in records), \
            [(r.id, r.status) for r in records]
    finally:
        if proc.poll() is None or _carrying(state):
            subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], env=env, timeout=300, check=False)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


def test_start_sh_service_mode_stops_the_same_way(tmp_path):
    state = (tmp_path / "state").resolve()
    port = HubProcess(state).service_port
    log = tmp_path / "start.log"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "TACC_STATE_DIR": str(state),
           "TACC_PORT": str(port), "TACC_DB_URL": "", "TACC_URL": "", "TACC_TOKEN": "", "TACC_NO_BOOTSTRAP": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen([str(ROOT / "scripts" / "start.sh"), "--service", "--gpus=2"], stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            try:
                return requests.get(url + "/api/health", timeout=2).status_code == 200
            except requests.RequestException:
                return proc.poll() is not None
        _wait("the service", up, 120, log)
        assert proc.poll() is None, log.read_text()[-3000:]
        token = re.search(r"TACC_TOKEN=(\S+)", log.read_text()).group(1)
        task = tmp_path / "long"
        task.mkdir()
        (task / "tacc.yaml").write_text("name: long\ncode: .\nentrypoint:\n  - echo $$ > pid\n  - sleep 600\n")
        sub = subprocess.run([str(BIN / "tcloud"), "submit", str(task), "--json"], capture_output=True, text=True,
                             env={**env, "TACC_URL": url, "TACC_TOKEN": token, "TACC_CONFIG": "/nonexistent"},
                             timeout=120)
        assert sub.returncode == 0, sub.stderr
        tid = int(re.search(r'"id":\s*(\d+)', sub.stdout).group(1))
        pidfile = state / "tasks" / str(tid) / "work" / "pid"
        _wait("the long task", lambda: pidfile.exists() and pidfile.read_text().strip(), 60, log)
        task_pid = int(pidfile.read_text())
        assert _alive(task_pid)

        stop = subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
        assert stop.returncode == 0, stop.stderr
        assert "left running" not in stop.stderr, stop.stderr
        proc.wait(30)
        assert not _alive(task_pid) and _carrying(state) == []
        rec = Store(f"sqlite:///{state / 'tacc.sqlite'}").get(tid)
        assert rec is not None and rec.status == TaskStatus.CANCELLED, rec
    finally:
        if proc.poll() is None or _carrying(state):
            subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], env=env, timeout=300, check=False)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
