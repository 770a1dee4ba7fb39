"""The production layout: the service as an unprivileged account, tasks as their owners through sudo.

The service runs as ``tacc-svc`` (no root); the only privileged step is ``tacc-launcher``, which
``sudo -n`` runs as root under the repository's own sudoers template (deploy/sudoers.d/tacc-hub,
its paths and account replaced by this test's). The attack suite runs against it as against the
root-run service, plus what only this layout has: the service's own account is not the task's.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import accounts

from .conftest import BIN, Api, ServiceProcess, tcloud, write_task
from .test_isolation import run_attack_suite

REPO = Path(__file__).resolve().parents[2]
SVC = "tacc-svc"


def sudoers_for(state_dir: Path) -> str:
    """deploy/sudoers.d/tacc-hub with this test's launcher, state dir and service account."""
    text = (REPO / "deploy" / "sudoers.d" / "tacc-hub").read_text()
    text = text.replace("/opt/tacc-hub/venv/bin/tacc-launcher", str(BIN / "tacc-launcher"))
    text = text.replace("/var/lib/tacc-hub/state", str(state_dir))
    text = re.sub(r"^tacc ALL", f"{SVC} ALL", text, flags=re.M)
    return text.replace("Defaults:tacc ", f"Defaults:{SVC} ")


@pytest.fixture
def unprivileged(tmp_path: Path) -> Iterator[ServiceProcess]:
    accounts.ensure_accounts((*accounts.USERS, SVC))
    svc_pw = pwd.getpwnam(SVC)
    base = accounts.data_dir("tacc-prod-")
    state, data = base / "state", base / "data"
    for d in (state, data):
        d.mkdir()
        os.chown(d, svc_pw.pw_uid, svc_pw.pw_gid)
    state.chmod(0o700)
    rule = Path(f"/etc/sudoers.d/tacc-test-{os.getpid()}")
    rule.write_text(sudoers_for(state))
    rule.chmod(0o440)
    check = subprocess.run(["visudo", "-cf", str(rule)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    run_as = ["setpriv", f"--reuid={SVC}", f"--regid={SVC}", "--init-groups", "--",
              "env", f"HOME={svc_pw.pw_dir}", f"USER={SVC}"]
    svc = ServiceProcess(state, "--gpus=2", "--TaccHub.grace_period=2", data_dir=data, run_as=run_as)
    try:
        yield svc.start()
    finally:
        svc.stop()
        rule.unlink()
        if not os.environ.get("TACC_TEST_KEEP"):
            shutil.rmtree(base, ignore_errors=True)


def test_an_unprivileged_service_runs_tasks_as_their_owners_through_sudo(unprivileged: ServiceProcess,
                                                                         tmp_path: Path) -> None:
    svc = unprivileged
    assert svc.proc is not None
    with open(f"/proc/{svc.proc.pid}/status") as fh:
        assert next(line.split()[1] for line in fh if line.startswith("Uid:")) == str(pwd.getpwnam(SVC).pw_uid)
    d = write_task(tmp_path / "who", "name: who\ncode: .\nentrypoint:\n  - id -un\n  - sleep 30\n")
    res = tcloud(svc, "alice", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    tid = json.loads(res.stdout)["id"]
    api = Api(svc.url, svc.token("alice"))
    api.wait_status(tid, {"running"})
    deadline = time.monotonic() + 20
    while "alice" not in api.call("GET", f"/api/tasks/{tid}/logs")[1].get("data", ""):
        assert time.monotonic() < deadline, "the service could not read alice's log"
    task_dir = svc.data_dir / "tasks" / str(tid)
    st = task_dir.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (pwd.getpwnam("alice").pw_uid, pwd.getpwnam(SVC).pw_gid,
                                                           0o2750)
    # cancel goes through sudo too, and waits for the supervisor
    assert api.call("POST", f"/api/tasks/{tid}/cancel")[0] == 200
    assert api.wait_status(tid, {"cancelled"}, timeout=30)["status"] == "cancelled"


def test_attacks_fail_against_an_unprivileged_service(unprivileged: ServiceProcess, tmp_path: Path) -> None:
    summary, log = run_attack_suite(unprivileged, tmp_path)
    assert summary["attempts"] >= 20 and summary["succeeded"] == [], log


def test_the_launcher_refuses_what_sudo_would_let_the_service_ask(unprivileged: ServiceProcess) -> None:
    """The service's account can call tacc-launcher as root; it must not get root's reach through it."""
    run = str(unprivileged.state_dir / "run")
    prefix = ["setpriv", f"--reuid={SVC}", f"--regid={SVC}", "--init-groups", "--", "sudo", "-n",
              str(BIN / "tacc-launcher")]
    # another run dir, not the service's own: sudo's rule already refuses it
    other = subprocess.run([*prefix, "/root", "start", "1"], capture_output=True, text=True)
    assert other.returncode != 0
    # a launch.json that asks for root, or for a system account: the launcher refuses
    for name, uid in (("root", 0), ("daemon", 1)):
        ctl = Path(run) / "990"
        subprocess.run([*prefix[:5], sys.executable, "-c",
                        "import json,os,sys; os.makedirs(sys.argv[1], mode=0o700, exist_ok=True); "
                        "json.dump({'task_id': 990, 'account': {'name': sys.argv[2], 'uid': int(sys.argv[3]), "
                        "'gid': int(sys.argv[3])}}, open(sys.argv[1] + '/launch.json', 'w'))",
                        str(ctl), name, str(uid)], check=True)
        res = subprocess.run([*prefix, run, "start", "990"], capture_output=True, text=True)
        assert res.returncode == 1 and "may not run tasks" in res.stderr, res.stderr
