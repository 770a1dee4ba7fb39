"""exec and shell into a running Slurm task (``srun --jobid --overlap``), through the real service and tcloud.

The essentials of tests/e2e/test_exec.py on the dev cluster: the command runs as the task's owner, on its
first node, in its working directory, with the GPUs and launch variables the task itself sees; exit codes
come back; hostile argv arrives literally; another user's token gets 404; a shell works on a real PTY; an
exec'd process ends with the task; sessions are audited.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import BIN, ROOT, Api, ServiceProcess, tcloud, write_task
from tests.e2e.test_exec import Terminal, _audit, _set_size

pytestmark = pytest.mark.timeout(900)
WAIT_S = 120


def _exec(svc: ServiceProcess, user: str, tid: int, *argv: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "TACC_URL": svc.url, "TACC_TOKEN": svc.token(user), "TACC_CONFIG": "/nonexistent"}
    return subprocess.run([str(BIN / "tcloud"), "exec", "-n", str(tid), "--", *argv], capture_output=True, env=env,
                          cwd=ROOT, timeout=120)


def _wait_file(path: Path) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.1)
    raise AssertionError(f"{path} was not written")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_exec_and_shell_in_a_slurm_task(slurm_service: ServiceProcess, tmp_path: Path) -> None:
    svc = slurm_service
    d = write_task(tmp_path / "t", "name: exec-slurm\ncode: .\nresources: {nodes: 2, gpus_per_node: 1}\n"
                   "entrypoint:\n"
                   "  - echo \"$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $TACC_TASK_ID\" > seen.$TACC_NODE_RANK\n"
                   "  - sleep 300\n"
                   "environment:\n  variables: {MY_VAR: \"a b,c'$(id)\"}\n")
    res = tcloud(svc, "ivan", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    tid = int(json.loads(res.stdout)["id"])
    api = Api(svc.url, svc.token("ivan"))
    try:
        api.wait_status(tid, {"running"}, timeout=WAIT_S)
        work = svc.data_dir / "tasks" / str(tid) / "work"
        seen = _wait_file(work / "seen.0")  # what rank 0 (the first node) sees

        res = _exec(svc, "ivan", tid, "whoami")
        assert (res.returncode, res.stdout) == (0, b"ivan\n"), res.stderr
        res = _exec(svc, "ivan", tid, "pwd")
        assert res.stdout.decode().strip() == str(work)
        res = _exec(svc, "ivan", tid, "sh", "-c", "echo \"$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $TACC_TASK_ID\"")
        assert res.stdout.decode().strip() == seen, res.stderr
        res = _exec(svc, "ivan", tid, "printenv", "MY_VAR")  # the task's own variables (its launch.sh exports)
        assert res.stdout == b"a b,c'$(id)\n", res.stderr
        res = _exec(svc, "ivan", tid, "sh", "-c", "echo out; echo err >&2; exit 7")
        assert res.returncode == 7 and res.stdout == b"out\n" and b"err\n" in res.stderr
        hostile = ["$(id)", ";rm -rf ~", "a,b=c", "--export=ALL", "FOO=bar"]
        res = _exec(svc, "ivan", tid, "printf", "%s\\n", *hostile)
        assert res.stdout.decode().split("\n")[:-1] == hostile, res.stderr

        # another user's token: 404, nothing ran
        marker = Path(f"/tmp/slurm-exec-bob-{os.getpid()}-{time.time_ns()}")
        res = _exec(svc, "bob", tid, "touch", str(marker))
        assert res.returncode == 255 and b"404" in res.stderr
        assert not marker.exists()

        # a shell on a real terminal
        env = {**os.environ, "TACC_URL": svc.url, "TACC_TOKEN": svc.token("ivan"), "TACC_CONFIG": "/nonexistent",
               "TERM": "xterm"}
        term = Terminal([str(BIN / "tcloud"), "shell", str(tid)], env)
        term.read_until(b"$ ", timeout=WAIT_S)
        term.send("echo who=$(whoami)\n")
        term.read_until(b"who=ivan")
        term.send("stty size\n")
        term.read_until(b"30 100")
        _set_size(term.fd, 41, 132)  # a resize reaches the shell on the node (srun holds the service's terminal)
        os.kill(term.pid, signal.SIGWINCH)
        deadline = time.monotonic() + WAIT_S
        while b"41 132" not in term.out:
            assert time.monotonic() < deadline, term.out[-500:]
            term.send("stty size\n")
            try:
                term.read_until(b"41 132", timeout=0.5)
            except AssertionError:
                pass
        term.send("exit 3\n")
        assert term.wait(WAIT_S) == 3

        # an exec'd sleep ends with the task
        proc = subprocess.Popen([str(BIN / "tcloud"), "exec", "-n", str(tid), "--", "sh", "-c",
                                 "echo $$; exec sleep 500"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                                env={**env, "TERM": "dumb"})
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        assert not _gone(pid)
        tcloud(svc, "ivan", "cancel", str(tid))
        api.wait_status(tid, {"cancelled"}, timeout=WAIT_S)
        deadline = time.monotonic() + WAIT_S
        while not _gone(pid):
            assert time.monotonic() < deadline, "the exec'd sleep outlived its task"
            time.sleep(0.1)
        assert proc.wait(WAIT_S) != 0
        status, _ = api.call("GET", f"/api/tasks/{tid}")
        assert status == 200

        rows = _audit(svc, tid)
        actions = {(r["actor"], r["action"]) for r in rows}
        assert ("ivan", "exec") in actions and ("ivan", "shell") in actions
        assert all(r["detail"]["node"] == seen.split()[0] for r in rows)
        assert not any(r["actor"] == "bob" for r in rows)
    finally:
        tcloud(svc, "ivan", "cancel", str(tid))  # a failure above leaves no job behind
