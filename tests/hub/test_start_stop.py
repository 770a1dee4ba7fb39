"""`./scripts/start.sh stop` stops the README's system cleanly: users' servers, tasks, the hub, its service.

The real script: start.sh (bootstrap, then the hub) in a temporary state dir on free ports, run as root
from this checkout (every account can use it): tasks run as their owners. Alice's server (a tacc task)
and a long task through the printed token (alice's: root's own tasks would be refused) running, each as
the Unix account alice; then `start.sh stop`. Nothing that carries the state dir or the data dir may be
left running (root supervisors included), and the tasks are recorded as cancelled, not lost.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import subprocess
import time
from pathlib import Path

import requests

from tacc_hub.launcher.proctree import descendants
from tacc_hub.store import Store, TaskStatus
from tests import accounts

from .conftest import BIN, PASSWORD, ROOT, HubProcess


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def _uid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return int(next(line.split()[1] for line in fh if line.startswith("Uid:")))


def _carrying(*dirs: Path) -> list[int]:
    """Live processes with one of ``dirs`` in their command line or environment (what the demo started)."""
    keys = [str(d).encode() for d in dirs]
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                blob = (proc / "cmdline").read_bytes() + b"\0" + (proc / "environ").read_bytes()
            except OSError:
                continue
            if any(key in blob for key in keys) and _alive(int(proc.name)):
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
    hub = HubProcess(state)  # only for its free ports, its data dir and its login helper: start.sh starts the hub
    data = hub.data_dir
    log = tmp_path / "start.log"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "TACC_STATE_DIR": str(state),
           "TACC_HUB_PORT": str(hub.port), "TACC_PORT": str(hub.service_port), "TACC_DEMO_PASSWORD": PASSWORD,
           "TACC_DEMO_USERS": "alice,bob", "TACC_DEMO_ADMINS": "admin", "TACC_DB_URL": "", "TACC_URL": "",
           "TACC_TOKEN": "", "TACC_NO_BOOTSTRAP": "1",  # the suite's venv is made; bootstrap is fresh-check.sh's
           "TACC_DATA_DIR": str(data), "TACC_TASK_IDENTITY": ""}
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
        text = log.read_text()
        token = re.search(r"TACC_TOKEN=(\S+)", text).group(1)
        assert "run as their own Unix account (TaccHub.task_identity=owner)" in text, text[-3000:]
        assert "WARNING" not in text and re.search(r"TACC_TOKEN=\S+ +# alice \(tasks run as the Unix account alice",
                                                   text), text[-3000:]

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
        pidfile = data / "tasks" / str(tid) / "work" / "pid"
        _wait("the long task", lambda: pidfile.exists() and pidfile.read_text().strip(), 60, log)
        task_pid = int(pidfile.read_text())
        assert _uid(task_pid) == accounts.uid("alice")
        before = _carrying(state, data)
        assert task_pid in before and proc.pid in before

        stop = subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
        assert stop.returncode == 0, stop.stderr
        assert "left running" not in stop.stderr, stop.stderr  # everything ended through the APIs and SIGTERM
        assert proc.wait(30) == 0 or proc.returncode is not None
        assert [p for p in before if _alive(p)] == []
        assert _carrying(state, data) == []

        store = Store(f"sqlite:///{state / 'tacc.sqlite'}")
        rec = store.get(tid)
        assert rec is not None and rec.status == TaskStatus.CANCELLED, rec
        records, _ = store.list_tasks(None, None, 100, None)
        assert len(records) >= 2  # the server's task too
        assert all(r.status in (TaskStatus.CANCELLED, TaskStatus.SUCCEEDED) for r in records), \
            [(r.id, r.status) for r in records]
    finally:
        if proc.poll() is None or _carrying(state, data):
            subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], env=env, timeout=300, check=False)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


def test_start_sh_service_mode_run_by_another_account_falls_back_to_service_identity(tmp_path):
    """start.sh --service run by an ordinary account (dave): it cannot run tasks as others, so every task runs as
    dave (task_identity=service), and it says so and why; `start.sh stop` (as dave) stops it the same way."""
    accounts.ensure_accounts(("dave",))
    dave = pwd.getpwnam("dave")
    base = accounts.data_dir("tacc-dave-")
    os.chown(base, dave.pw_uid, dave.pw_gid)
    state = base / "state"
    data = Path(f"{state}-data")  # the service's default: outside the checkout, dave's
    port = HubProcess(state).service_port
    log = base / "start.log"
    env = {"PATH": f"{BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin", "HOME": dave.pw_dir, "USER": "dave",
           "LOGNAME": "dave", "LANG": "C.UTF-8", "TACC_STATE_DIR": str(state), "TACC_PORT": str(port),
           "TACC_NO_BOOTSTRAP": "1"}
    as_dave = {"user": dave.pw_uid, "group": dave.pw_gid, "extra_groups": [], "env": env, "cwd": str(base)}
    with log.open("wb") as out:
        os.chown(log, dave.pw_uid, dave.pw_gid)
        proc = subprocess.Popen([str(ROOT / "scripts" / "start.sh"), "--service", "--gpus=2"], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, **as_dave)
    url = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            try:
                return requests.get(url + "/api/health", timeout=2).status_code == 200
            except requests.RequestException:
                return proc.poll() is not None
        _wait("the service", up, 120, log)
        assert proc.poll() is None, log.read_text()[-3000:]
        text = log.read_text()
        assert "WARNING: every user's tasks and Jupyter server run as dave" in text, text[-3000:]
        assert "TaccHub.task_identity=service" in text and "it runs as dave, not as root" in text
        assert "/srv or /opt" in text and "run ./scripts/start.sh as root" in text
        assert "task_identity is 'service'" in text  # the service's own warning at its start
        token = re.search(r"TACC_TOKEN=(\S+) +# you \(dave\)", text).group(1)
        task = tmp_path / "long"
        task.mkdir()
        (task / "tacc.yaml").write_text("name: long\ncode: .\nentrypoint:\n  - echo $$ > pid\n  - sleep 600\n")
        sub = subprocess.run([str(BIN / "tcloud"), "submit", str(task), "--json"], capture_output=True, text=True,
                             env={**os.environ, "TACC_URL": url, "TACC_TOKEN": token, "TACC_CONFIG": "/nonexistent"},
                             timeout=120)
        assert sub.returncode == 0, sub.stderr
        tid = int(re.search(r'"id":\s*(\d+)', sub.stdout).group(1))
        pidfile = data / "tasks" / str(tid) / "work" / "pid"
        _wait("the long task", lambda: pidfile.exists() and pidfile.read_text().strip(), 60, log)
        task_pid = int(pidfile.read_text())
        assert _alive(task_pid) and _uid(task_pid) == dave.pw_uid

        stop = subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], capture_output=True, text=True,
                              timeout=300, **as_dave)
        assert stop.returncode == 0, stop.stderr
        assert "left running" not in stop.stderr, stop.stderr
        proc.wait(30)
        assert not _alive(task_pid) and _carrying(state, data) == []
        rec = Store(f"sqlite:///{state / 'tacc.sqlite'}").get(tid)
        assert rec is not None and rec.status == TaskStatus.CANCELLED, rec
    finally:
        if proc.poll() is None or _carrying(state, data):
            subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], timeout=300, check=False, **as_dave)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


def test_start_sh_service_mode_stops_the_same_way(tmp_path):
    state = (tmp_path / "state").resolve()
    hub = HubProcess(state)
    port, data = hub.service_port, hub.data_dir
    log = tmp_path / "start.log"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "TACC_STATE_DIR": str(state),
           "TACC_PORT": str(port), "TACC_DB_URL": "", "TACC_URL": "", "TACC_TOKEN": "", "TACC_NO_BOOTSTRAP": "1",
           "TACC_DATA_DIR": str(data), "TACC_TASK_IDENTITY": ""}
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
        pidfile = data / "tasks" / str(tid) / "work" / "pid"
        _wait("the long task", lambda: pidfile.exists() and pidfile.read_text().strip(), 60, log)
        task_pid = int(pidfile.read_text())
        assert _alive(task_pid) and _uid(task_pid) == accounts.uid("alice")  # the printed token is alice's

        stop = subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
        assert stop.returncode == 0, stop.stderr
        assert "left running" not in stop.stderr, stop.stderr
        proc.wait(30)
        assert not _alive(task_pid) and _carrying(state, data) == []
        rec = Store(f"sqlite:///{state / 'tacc.sqlite'}").get(tid)
        assert rec is not None and rec.status == TaskStatus.CANCELLED, rec
    finally:
        if proc.poll() is None or _carrying(state, data):
            subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], env=env, timeout=300, check=False)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


def test_start_sh_stop_kills_tasks_whose_service_is_gone(tmp_path):
    """The service dies (SIGKILL: no cancel is possible); its tasks' root supervisors run on. `start.sh stop`
    kills them through tacc-launcher (kill), and nothing of the task is left."""
    state = (tmp_path / "state").resolve()
    hub = HubProcess(state)
    port, data = hub.service_port, hub.data_dir
    log = tmp_path / "start.log"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "TACC_STATE_DIR": str(state),
           "TACC_PORT": str(port), "TACC_DB_URL": "", "TACC_URL": "", "TACC_TOKEN": "", "TACC_NO_BOOTSTRAP": "1",
           "TACC_DATA_DIR": str(data), "TACC_TASK_IDENTITY": ""}
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
        token = re.search(r"TACC_TOKEN=(\S+)", log.read_text()).group(1)
        task = tmp_path / "stubborn"
        task.mkdir()
        # it ignores SIGTERM, and leaves a child of its own session behind
        (task / "tacc.yaml").write_text("name: stubborn\ncode: .\nentrypoint:\n  - trap '' TERM\n"
                                        "  - setsid sleep 600 &\n  - echo $$ > pid\n  - sleep 600\n")
        sub = subprocess.run([str(BIN / "tcloud"), "submit", str(task), "--json"], capture_output=True, text=True,
                             env={**env, "TACC_URL": url, "TACC_TOKEN": token, "TACC_CONFIG": "/nonexistent"},
                             timeout=120)
        assert sub.returncode == 0, sub.stderr
        tid = int(re.search(r'"id":\s*(\d+)', sub.stdout).group(1))
        pidfile = data / "tasks" / str(tid) / "work" / "pid"
        _wait("the task", lambda: pidfile.exists() and pidfile.read_text().strip(), 60, log)
        supervisor = int(json.loads((state / "run" / str(tid) / "supervisor.json").read_text())["pid"])
        tree = [supervisor, *descendants(supervisor)]
        assert len(tree) >= 3 and all(_alive(p) for p in tree)
        os.killpg(proc.pid, signal.SIGKILL)  # the service (start.sh exec'd it), and nothing else: a new session
        proc.wait(10)
        assert all(_alive(p) for p in tree)  # the task runs on under its root supervisor

        stop = subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
        assert stop.returncode == 0, stop.stderr
        assert f"task {tid} still runs (supervisor pid {supervisor})" in stop.stderr, stop.stderr
        assert "left running" not in stop.stderr, stop.stderr  # tacc-launcher kill ended all of it
        assert [p for p in tree if _alive(p)] == [] and _carrying(state, data) == []
        assert (state / "run" / str(tid) / "exitcode").exists()
    finally:
        if proc.poll() is None or _carrying(state, data):
            subprocess.run([str(ROOT / "scripts" / "start.sh"), "stop"], env=env, timeout=300, check=False)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
