"""``tacc-launcher RUN_DIR exec ID``, run for real as root against control directories made here.

A root ``sleep`` stands in for the task's supervisor (the launcher checks its pid, start time and
uid); the command runs as alice. What it must refuse (usage, no live supervisor, a forged one, an
ended task), and what it must do: the account, the directory, the environment, the exit status,
and nothing left running once the supervisor is gone.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tacc_hub.launcher.execute import expand_word, parse_args, script_exports
from tacc_hub.launcher.proctree import start_time
from tests import accounts

LAUNCHER = [sys.executable, "-I", "-m", "tacc_hub.launcher"]
WAIT_S = 30


@pytest.fixture(scope="module", autouse=True)
def _accounts() -> None:
    accounts.ensure_accounts()


class Task:
    """A control dir (root's, 0700) and a task dir (alice's), with a stand-in supervisor."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run = root / "run"
        self.ctl = self.run / "5"
        self.ctl.mkdir(parents=True, mode=0o700)
        self.run.chmod(0o700)
        pw = pwd.getpwnam("alice")
        self.task_dir = root / "tasks" / "5"
        (self.task_dir / "work" / "sub").mkdir(parents=True)
        for p in (root / "tasks", self.task_dir, self.task_dir / "work", self.task_dir / "work" / "sub"):
            os.chown(p, pw.pw_uid, pw.pw_gid) if p != root / "tasks" else p.chmod(0o711)
        spec = {"task_id": 5, "account": {"name": "alice", "uid": pw.pw_uid, "gid": pw.pw_gid},
                "task_dir": str(self.task_dir), "workdir": "sub",
                "env": {"PATH": "/usr/bin:/bin", "TACC_TASK_ID": "5", "CUDA_VISIBLE_DEVICES": "1", "HOME": pw.pw_dir}}
        (self.ctl / "launch.json").write_text(json.dumps(spec))
        self.supervisor: subprocess.Popen[bytes] | None = None

    def start_supervisor(self, **popen: object) -> None:
        self.supervisor = subprocess.Popen(["sleep", "300"], **popen)  # type: ignore[call-overload]
        deadline = time.monotonic() + WAIT_S
        while start_time(self.supervisor.pid) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        self.write_supervisor(self.supervisor.pid)

    def write_supervisor(self, pid: int) -> None:
        (self.ctl / "supervisor.json").write_text(json.dumps({"pid": pid, "start_time": start_time(pid)}))

    def stop_supervisor(self) -> None:
        if self.supervisor is not None and self.supervisor.poll() is None:
            self.supervisor.kill()
            self.supervisor.wait()

    def exec(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*LAUNCHER, str(self.run), "exec", "5", *args], capture_output=True, text=True,
                              timeout=timeout, env={"PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL)


@pytest.fixture
def task() -> Iterator[Task]:
    root = accounts.data_dir("tacc-exec-")
    t = Task(root)
    yield t
    t.stop_supervisor()
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("args", [[], ["--", ], ["--tty"], ["--bogus", "--", "id"], ["--tty", "--tty", "--", "x"],
                                  ["id"], ["--", "a\0b"]])
def test_usage(args: list[str]) -> None:
    assert parse_args(args) is None


def test_usage_errors_exit_2(task: Task) -> None:
    task.start_supervisor()
    for args in (["id"], ["--"], ["--what", "--", "id"]):
        res = task.exec(*args)
        assert res.returncode == 2 and "usage" in res.stderr, res


def test_runs_as_the_account_in_the_working_directory_with_the_launch_env(task: Task) -> None:
    task.start_supervisor()
    res = task.exec("--", "sh", "-c", "id -un; pwd; echo $TACC_TASK_ID $CUDA_VISIBLE_DEVICES; exit 7")
    assert res.returncode == 7, res.stderr
    assert res.stdout.split("\n")[:3] == ["alice", str(task.task_dir / "work" / "sub"), "5 1"]
    res = task.exec("--", "sh", "-c", "kill -9 $$")
    assert res.returncode == 137
    res = task.exec("--", "no-such-command-xyz")
    assert res.returncode == 127 and "command not found" in res.stderr


def test_refused_without_a_live_supervisor(task: Task) -> None:
    res = task.exec("--", "id")  # never started
    assert res.returncode == 1 and "not running" in res.stderr
    task.start_supervisor()
    (task.ctl / "exitcode").write_text("0\n")  # ended
    res = task.exec("--", "id")
    assert res.returncode == 1 and "not running" in res.stderr
    (task.ctl / "exitcode").unlink()
    # a supervisor.json naming someone else's process (a recycled pid, or a forgery): not a supervisor
    alice = pwd.getpwnam("alice")
    other = subprocess.Popen(["sleep", "300"], user=alice.pw_uid, group=alice.pw_gid)
    try:
        deadline = time.monotonic() + WAIT_S
        while start_time(other.pid) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        task.write_supervisor(other.pid)
        res = task.exec("--", "touch", str(task.task_dir / "work" / "ran"))
        assert res.returncode == 1 and "not running" in res.stderr
        assert not (task.task_dir / "work" / "ran").exists()
        # the right pid with another start time
        (task.ctl / "supervisor.json").write_text(json.dumps({"pid": task.supervisor.pid, "start_time": 1}))
        assert task.exec("--", "true").returncode == 1
    finally:
        other.kill()
        other.wait()


def test_nothing_outlives_the_supervisor(task: Task) -> None:
    task.start_supervisor()
    proc = subprocess.Popen([*LAUNCHER, str(task.run), "exec", "5", "--", "sh", "-c",
                             "(setsid sleep 400 & echo $!); echo $$; exec sleep 300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"},
                            stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    pids = [int(proc.stdout.readline()), int(proc.stdout.readline())]
    assert all(start_time(p) is not None for p in pids)
    task.stop_supervisor()
    assert proc.wait(WAIT_S) == 128 + 9
    assert all(start_time(p) is None for p in pids)


def test_leftovers_end_with_the_command(task: Task) -> None:
    task.start_supervisor()
    res = task.exec("--", "sh", "-c", f"setsid sleep 400 & echo $! > {os.path.join(task.task_dir, 'work', 'left')}")
    assert res.returncode == 0, res.stderr
    pid = int((task.task_dir / "work" / "left").read_text())
    assert start_time(pid) is None


def test_a_terminal_session_gets_a_controlling_terminal_and_the_login_shell(task: Task) -> None:
    import pty

    task.start_supervisor()
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(LAUNCHER[0], [*LAUNCHER, str(task.run), "exec", "5", "--tty", "--"],
                  {"PATH": "/usr/bin:/bin", "TERM": "vt100"})
    out = b""
    os.write(fd, b"echo T=$TERM; tty; exit 4\n")
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 4, out
    assert b"T=vt100" in out and b"/dev/pts/" in out, out


def test_the_launch_scripts_exports_as_bash_would_expand_them() -> None:
    import shlex

    env = {"PATH": "/usr/bin:/bin", "X": "x"}
    assert expand_word(shlex.quote("it's $(id) `id`"), env) == "it's $(id) `id`"
    assert expand_word('"$X/bin:${PATH}"', env) == "x/bin:/usr/bin:/bin"
    assert expand_word(shlex.quote("/a b") + ':"$PATH"', env) == "/a b:/usr/bin:/bin"
    for word in ("$(id)", "`id`", "a b", "x;y", '"$(id)"', "'open", '"open', "${A-b}"):
        assert expand_word(word, env) is None, word  # left out, never run
    script = "\n".join(["#!/bin/bash", "export VIRTUAL_ENV=/venv", 'export PATH="$VIRTUAL_ENV/bin:$PATH"',
                         f"export MINE={shlex.quote('a,b')}", 'export ALIAS="${MINE}"', "export BAD=$(id)",
                         "if x; then", "  export INSIDE=1", "fi", 'cd -- "${TACC_WORKDIR}"/sub', "export AFTER=1"])
    assert script_exports(script, env) == {"PATH": "/venv/bin:/usr/bin:/bin", "X": "x", "VIRTUAL_ENV": "/venv",
                                           "MINE": "a,b", "ALIAS": "a,b"}
