"""tacc-launcher's own checks, attacked directly (as the service's caller would misuse it) and Identity.

Runs the real launcher as a subprocess, as root (the suite runs as root), against control
directories made by the test: what it must refuse, and what it must do with a task that leaves
processes behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tacc_hub.executors.identity import Identity, IdentityError
from tacc_hub.snapshot import pack
from tests import accounts

LAUNCHER = [sys.executable, "-I", "-m", "tacc_hub.launcher"]


@pytest.fixture(scope="module", autouse=True)
def _accounts() -> None:
    accounts.ensure_accounts()


def control(tmp: Path, task_id: int, spec: dict) -> Path:
    run = tmp / "run"
    (run / str(task_id)).mkdir(parents=True, exist_ok=True, mode=0o700)
    run.chmod(0o700)
    (run / str(task_id) / "launch.json").write_text(json.dumps({"task_id": task_id, **spec}))
    return run


def launch(run: Path, verb: str, task_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LAUNCHER, str(run), verb, task_id], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})


def test_identity_maps_names_and_refuses_system_accounts() -> None:
    ident = Identity(mode="owner", username_map={"alice@uni.edu": "alice", "evil": "root"})
    acct = ident.account("alice@uni.edu")
    assert acct is not None and acct.name == "alice" and acct.uid == pwd.getpwnam("alice").pw_uid
    with pytest.raises(IdentityError, match="no Unix account for 'nosuch-tacc-user' on this cluster"):
        ident.account(accounts.NO_ACCOUNT)
    with pytest.raises(IdentityError, match="may not run tasks"):
        ident.account("evil")  # mapped to root
    with pytest.raises(IdentityError, match="not a valid account name"):
        ident.account("../etc")
    assert Identity(mode="service").account("alice") is None


@pytest.mark.parametrize("args", [["start"], ["/x", "start", "1", "extra"], ["/x", "rm", "1"]])
def test_usage_errors(args: list[str]) -> None:
    res = subprocess.run([*LAUNCHER, *args], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "usage" in res.stderr


def test_a_run_dir_others_can_write_or_a_link_is_refused(tmp_path: Path) -> None:
    run = control(tmp_path, 5, {"account": None})
    for bad in ("1x", "-1", "../5"):
        assert launch(run, "start", bad).returncode == 1
    run.chmod(0o777)
    res = launch(run, "start", "5")
    assert res.returncode == 1 and "writable by it alone" in res.stderr
    run.chmod(0o700)
    link = tmp_path / "link"
    link.symlink_to(run)
    res = launch(link, "start", "5")
    assert res.returncode == 1, res.stderr  # O_NOFOLLOW: a link is not the service's directory
    (run / "6").symlink_to(run / "5")
    assert launch(run, "start", "6").returncode == 1


def test_an_account_whose_uid_does_not_match_is_refused(tmp_path: Path) -> None:
    alice = pwd.getpwnam("alice")
    run = control(tmp_path, 7, {"account": {"name": "alice", "uid": alice.pw_uid + 1, "gid": alice.pw_gid}})
    res = launch(run, "start", "7")
    assert res.returncode == 1 and "not what the service sent" in res.stderr


def test_a_task_dir_through_a_link_or_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    alice, bob = pwd.getpwnam("alice"), pwd.getpwnam("bob")
    tasks = accounts.data_dir("tacc-launcher-") / "tasks"
    tasks.mkdir()
    (tasks / "8").mkdir()
    os.chown(tasks / "8", bob.pw_uid, bob.pw_gid)  # bob's directory: alice's task must not take it over
    spec = {"account": {"name": "alice", "uid": alice.pw_uid, "gid": alice.pw_gid}, "task_dir": str(tasks / "8"),
            "code": {"kind": "git", "url": "https://example.invalid/x", "commit": "0" * 40}, "env": {}}
    res = launch(control(tmp_path, 8, spec), "start", "8")
    assert res.returncode == 1 and "belongs to uid" in res.stderr, res.stderr
    (tasks / "9").symlink_to("/etc")
    res = launch(control(tmp_path, 9, {**spec, "task_dir": str(tasks / "9")}), "start", "9")
    assert res.returncode == 1, res.stderr
    assert pwd.getpwuid(os.stat("/etc").st_uid).pw_name == "root"  # /etc was not handed to alice


def test_the_supervisor_outlives_and_reaps_every_process(tmp_path: Path) -> None:
    alice = pwd.getpwnam("alice")
    data = accounts.data_dir("tacc-launcher-")
    (data / "tasks").mkdir()
    code = tmp_path / "code.tar.gz"
    payload = pack(accounts.data_dir("tacc-empty-"))
    code.write_bytes(payload)
    script = "setsid bash -c 'trap \"\" TERM; echo $$ > work/daemon; exec sleep 1000' & sleep 0.3; echo ran; exit 4\n"
    spec = {"account": {"name": "alice", "uid": alice.pw_uid, "gid": alice.pw_gid},
            "task_dir": str(data / "tasks" / "10"), "keep": ["output.log", "checkpoint"],
            "code": {"kind": "snapshot", "archive": str(code), "digest": hashlib.sha256(payload).hexdigest()},
            "files": {"launch.sh": script}, "env": {"PATH": "/usr/bin:/bin", "HOME": alice.pw_dir}, "grace": 1}
    run = control(tmp_path, 10, spec)
    proc = subprocess.Popen([*LAUNCHER, str(run), "start", "10"], stdout=subprocess.PIPE, text=True,
                            env={"PATH": "/usr/bin:/bin"})
    assert proc.stdout is not None
    ready = json.loads(proc.stdout.readline())
    assert ready["pid"] == proc.pid
    assert proc.wait(30) == 0
    assert (run / "10" / "exitcode").read_text() == "4\n"
    assert "1 leftover process(es)" in (run / "10" / "notes").read_text()
    daemon = int((data / "tasks" / "10" / "work" / "daemon").read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{daemon}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{daemon}").exists()
    log = data / "tasks" / "10" / "output.log"
    assert log.read_text() == "ran\n" and log.stat().st_uid == alice.pw_uid
    assert (run / "10" / "exitcode").stat().st_uid == 0  # written by root, in the service's directory
