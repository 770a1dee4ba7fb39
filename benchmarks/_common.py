"""Shared helpers of the benchmarks: a real ``tacc-hub serve`` in a temp dir, tokens, code upload, stats.

Every benchmark starts its own service on 127.0.0.1 (a free port, a fresh state directory
that is removed afterwards) and talks to nothing else. Console scripts are called by the
absolute path next to ``sys.executable`` (no shims on PATH, no extra shell startup).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import urllib3

BIN = Path(sys.executable).parent
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


BENCH_USERS = ("alice", "bob", "carol", "dave")


def ensure_accounts(names: Sequence[str] = BENCH_USERS) -> None:
    """The benchmarks' users as Unix accounts (tasks run as their owners); created with useradd as root."""
    import pwd

    for name in names:
        try:
            pwd.getpwnam(name)
        except KeyError:
            if os.geteuid() != 0:
                raise SystemExit(f"benchmark: user {name!r} needs a Unix account (run as root to create it)") from None
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for service and CLI subprocesses: no inherited TACC_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACC_") and k != "JUPYTERHUB_API_TOKEN"}
    env["TACC_CONFIG"] = "/nonexistent"
    # As on a user's machine, let Python cache bytecode (some sandboxes set this to 1 for everything).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return env


class Service:
    """``tacc-hub serve`` in its own temp state dir; use as a context manager."""

    def __init__(self, *extra: str, name: str = "bench", keep: bool = False) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix=f"tacc-{name}-"))
        self.tmp.chmod(0o711)  # tasks run as their owners: they must reach <state>-data (the state stays 0700)
        ensure_accounts()
        self.state_dir = self.tmp / "state"
        self.state_dir.mkdir()
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.extra = extra
        self.keep = keep
        self.proc: subprocess.Popen[bytes] | None = None
        self.tokens: dict[str, str] = {}

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.state_dir.resolve() / 'tacc.sqlite'}"

    def token(self, user: str) -> str:
        """Mint a token (works before or after start: it migrates the DB itself)."""
        if user not in self.tokens:
            out = subprocess.run(
                [str(BIN / "tacc-hub"), "token", user, f"--state-dir={self.state_dir}"],
                check=True, capture_output=True, text=True, cwd=self.tmp, env=clean_env(), timeout=60,
            )
            self.tokens[user] = out.stdout.strip()
        return self.tokens[user]

    def start(self, timeout: float = 30.0) -> Service:
        log = (self.tmp / "service.log").open("ab")
        self.proc = subprocess.Popen(
            [str(BIN / "tacc-hub"), "serve", f"--port={self.port}", f"--state-dir={self.state_dir}",
             "--ip=127.0.0.1", *self.extra],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp, env=clean_env(),
        )
        http = urllib3.PoolManager()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited: {self.log_tail()}")
            try:
                if http.request("GET", self.url + "/api/health", timeout=1, retries=False).status == 200:
                    return self
            except urllib3.exceptions.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"service did not become healthy in {timeout} s: {self.log_tail()}")

    def cpu_seconds(self) -> float:
        """User + system CPU time the service process has used so far (from /proc)."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log_tail(self, n: int = 3000) -> str:
        p = self.tmp / "service.log"
        return p.read_text(errors="replace")[-n:] if p.exists() else ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def kill_task_processes(self) -> None:
        """Kill every process of every task still running (tasks outlive a stopped service): SIGKILL through
        each task's supervisor (``tacc-launcher RUN_DIR kill ID``)."""
        run = self.state_dir / "run"
        if not run.is_dir():
            return
        for entry in run.iterdir():
            if entry.name.isdigit() and not (entry / "exitcode").exists():
                subprocess.run([sys.executable, "-I", "-m", "tacc_hub.launcher", str(run), "kill", entry.name],
                               capture_output=True, timeout=30, check=False)

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        try:
            self.kill_task_processes()
        finally:
            if not self.keep:
                shutil.rmtree(self.tmp, ignore_errors=True)


class Api:
    """A raw JSON caller (one pooled keep-alive connection)."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
        self.http = urllib3.PoolManager(maxsize=2)

    def call(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
             content_type: str | None = None) -> tuple[int, Any]:
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        r = self.http.request(method, self.url + path, body=data, headers=headers, retries=False, timeout=30)
        return r.status, (json.loads(r.data) if r.data else None)

    def upload_code(self, files: dict[str, str] | None = None) -> dict[str, str]:
        """Pack a tiny code directory, upload it, return the spec's ``code`` block."""
        from tacc_hub.snapshot import digest_of, pack

        d = Path(tempfile.mkdtemp(prefix="tacc-bench-code-"))
        try:
            for name, text in (files or {"main.py": "print('hello')\n"}).items():
                (d / name).write_text(text)
            data = pack(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        digest = digest_of(data)
        status, out = self.call("PUT", f"/api/code/{digest}", raw=data, content_type="application/gzip")
        if status not in (200, 201):
            raise RuntimeError(f"code upload failed: {status} {out}")
        return {"kind": "snapshot", "digest": digest}

    def wait_status(self, task_id: int, wanted: set[str], timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            _, last = self.call("GET", f"/api/tasks/{task_id}")
            if last.get("status") in wanted:
                return last
            time.sleep(0.02)
        raise RuntimeError(f"task {task_id} did not reach {wanted} in {timeout} s: {last.get('status')}")


# --- statistics and printing ------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """Percentile ``q`` (0..100) by linear interpolation between closest ranks."""
    if not values:
        return math.nan
    s = sorted(values)
    k = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"


def header(title: str) -> None:
    print(f"== {title} ==", flush=True)


def verdict(ok: bool, what: str) -> None:
    print(f"{'target met' if ok else 'TARGET MISSED'}: {what}", flush=True)
