"""End-to-end fixtures: the real service process (`tacc-hub serve`) and the real `tcloud` CLI.

One service is shared by the tests of a session (started once, 2 fake GPU
slots, a short cancel grace period); tests that restart a service start
their own with ``ServiceProcess``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from tests import accounts
from tests.accounts import ensure_accounts

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


_DATA_DIRS: dict[Path, Path] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServiceProcess:
    def __init__(self, state_dir: Path, *extra: str, port: int | None = None, db_url: str | None = None,
                 data_dir: Path | None = None, run_as: list[str] | None = None) -> None:
        ensure_accounts()
        self.run_as = list(run_as or [])  # a prefix (setpriv ...) that runs the service and its CLI as another user
        self.state_dir = state_dir
        # tasks run as their owners: their data_dir must be reachable by every account (not under pytest's tmp)
        # (one per state dir, so that a service restarted on the same state finds its tasks' files)
        self.data_dir = data_dir or _DATA_DIRS.setdefault(state_dir.resolve(), accounts.data_dir())
        self.db = [f"--db-url={db_url}"] if db_url else []
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.tokens: dict[str, str] = {}

    def start(self) -> ServiceProcess:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        log = (self.state_dir / "service.log").open("ab")
        self.proc = subprocess.Popen(
            [*self.run_as, str(BIN / "tacc-hub"), "serve", f"--port={self.port}", f"--state-dir={self.state_dir}",
             f"--TaccHub.data_dir={self.data_dir}", "--TaccHub.poll_interval=0.5", *self.db, *self.extra],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.state_dir, env={**os.environ, "TACC_DB_URL": ""},
        )
        http = urllib3.PoolManager()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited: {(self.state_dir / 'service.log').read_text()[-3000:]}")
            try:
                if http.request("GET", self.url + "/api/health", timeout=1, retries=False).status == 200:
                    return self
            except urllib3.exceptions.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("service did not become healthy in 30 s")

    def token(self, user: str, admin: bool = False) -> str:
        if user not in self.tokens:
            out = subprocess.run(
                [*self.run_as, str(BIN / "tacc-hub"), "token", user, *(["--admin"] if admin else []),
                 f"--state-dir={self.state_dir}", *self.db],
                check=True, capture_output=True, text=True, cwd=self.state_dir, env={**os.environ, "TACC_DB_URL": ""},
            )
            self.tokens[user] = out.stdout.strip()
        return self.tokens[user]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)


class Api:
    """A minimal raw HTTP caller for tests that need exact status codes and bodies."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.http = urllib3.PoolManager()
        self.headers = {"Authorization": f"token {token}"} if token else {}

    def call(self, method: str, path: str, body: bytes | str | dict | None = None,
             content_type: str = "application/json") -> tuple[int, dict]:
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        headers = {**self.headers, "Content-Type": content_type}
        r = self.http.request(method, self.url + path, body=body, headers=headers, retries=False, timeout=30)
        try:
            return r.status, json.loads(r.data) if r.data else {}
        except ValueError:
            return r.status, {"raw": r.data[:200]}

    def wait_status(self, task_id: int, wanted: set[str], timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        last: dict = {}
        while time.monotonic() < deadline:
            _, last = self.call("GET", f"/api/tasks/{task_id}")
            if last.get("status") in wanted:
                return last
            time.sleep(0.1)
        raise AssertionError(f"task {task_id} did not reach {wanted}: {last}")


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    svc = ServiceProcess(tmp_path_factory.mktemp("svc"), "--gpus=2", "--TaccHub.grace_period=2",
                         "--TaccHub.max_running_per_user=3").start()
    yield svc
    svc.stop()


def tcloud(service: ServiceProcess, user: str, *args: str, cwd: Path | None = None,
           timeout: float = 300, admin: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TACC_URL": service.url, "TACC_TOKEN": service.token(user, admin=admin),
           "TACC_CONFIG": "/nonexistent"}
    return subprocess.run([str(BIN / "tcloud"), *args], capture_output=True, text=True, cwd=cwd or ROOT,
                          env=env, timeout=timeout)


def write_task(dir: Path, yaml_text: str, files: dict[str, str] | None = None) -> Path:
    dir.mkdir(parents=True, exist_ok=True)
    (dir / "tacc.yaml").write_text(yaml_text)
    for name, content in (files or {}).items():
        (dir / name).write_text(content)
    return dir


def task_pid(data_dir: Path, task_id: int, timeout: float = 10) -> int:
    """The pid a test task wrote to ``pid`` in its working dir (``echo $$ > pid``); ``data_dir``: the service's."""
    pidfile = data_dir / "tasks" / str(task_id) / "work" / "pid"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if text:
            return int(text)
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} wrote no pid file")
