"""Slurm jobs as their owners (real dev cluster, real Unix accounts): accounting, isolation, planted links.

The accounts ``tacc-alice`` and ``tacc-bob`` come from the ``accounts`` fixture (conftest.py; see
``owners``). Every attack runs where the attacker stands: inside alice's job, as alice.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from tacc_hub.executors import Launch, LaunchError
from tacc_hub.executors.identity import Account
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tests.e2e.conftest import Api, ServiceProcess, tcloud, write_task
from tests.slurm.conftest import SlurmCluster
from tests.slurm.owners import Owners, sacct, sh

pytestmark = pytest.mark.timeout(600)


async def test_jobs_run_as_their_owners_and_are_accounted_to_their_group(owners: Owners) -> None:
    script = 'echo "I am $(id -un) in $(pwd)"; touch "$TACC_CHECKPOINT_DIR/saved" "$TACC_USERDIR/mine"\n'
    a = await owners.launch(1, "alice", script, "n1")
    b = await owners.launch(2, "bob", script, "n2")
    for task_id in (1, 2):
        assert (await owners.wait(task_id, "exited")).exit_code == 0, owners.log(task_id)
    assert f"I am tacc-alice in {owners.ex.task_dir(1)}/work" in owners.log(1), owners.log(1)
    assert f"I am tacc-bob in {owners.ex.task_dir(2)}/work" in owners.log(2), owners.log(2)
    assert sacct(a["job_id"]) == ["tacc-alice|phys-physics|normal"]
    assert sacct(b["job_id"]) == ["tacc-bob|biology|normal"]
    listed = sh("sacct", "-n", "-X", "-P", "-u", "tacc-alice", "-o", "JobID").stdout.split()
    assert a["job_id"] in listed and b["job_id"] not in listed, listed
    for task_id, user in ((1, "alice"), (2, "bob")):
        acct = owners.accounts[user]
        tdir = owners.ex.task_dir(task_id)
        st = os.lstat(tdir)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (acct.uid, 0o700), (tdir, st)
        assert (tdir / "checkpoint" / "saved").stat().st_uid == acct.uid
        udir = owners.root / "data" / "users" / acct.name
        assert (os.lstat(udir).st_uid, stat.S_IMODE(os.lstat(udir).st_mode)) == (acct.uid, 0o700)
        assert (udir / "mine").stat().st_uid == acct.uid
    for shared in ("tasks", "users"):  # passable, not listable
        assert stat.S_IMODE(os.lstat(owners.root / "data" / shared).st_mode) == 0o711


async def test_alice_cannot_read_or_write_bobs_task(owners: Owners) -> None:
    await owners.launch(1, "bob", "echo bob-secret-$((6 * 7))\n", "n3")
    assert (await owners.wait(1, "exited")).exit_code == 0
    assert "bob-secret-42" in owners.log(1)
    bob = owners.ex.task_dir(1)
    users = owners.root / "data" / "users"
    attack = (f'cat {bob}/output.log; echo "rc=$?"\n'
              f'ls {bob}; echo "rc=$?"\n'
              f'echo forged >> {bob}/output.log; echo "rc=$?"\n'
              f'ls {users}; echo "rc=$?"\n'
              f'ls {users}/tacc-bob; echo "rc=$?"\n'
              f'ls {owners.root / "data" / "tasks"}; echo "rc=$?"\n')
    await owners.launch(2, "alice", attack, "n4")
    assert (await owners.wait(2, "exited")).exit_code == 0, owners.log(2)
    out = owners.log(2)
    assert "bob-secret-42" not in out and out.count("Permission denied") == 6, out
    assert [line for line in out.splitlines() if line.startswith("rc=")] == ["rc=1", "rc=2", "rc=1", "rc=2", "rc=2",
                                                                             "rc=2"], out
    assert "forged" not in owners.log(1)


async def test_links_the_job_plants_are_never_followed(owners: Owners, shared_root: Path) -> None:
    # Root-only files: what the service would report if it followed the job's links as root.
    secrets = shared_root / "secrets"
    secrets.mkdir(mode=0o755)
    gate = shared_root / "gate"
    gate.mkdir(mode=0o777)
    gate.chmod(0o777)
    plant = (f'while [ ! -e {gate}/go ]; do sleep 0.1; done\n'
             f'cd "$TACC_TASKDIR"; ln -sfn {secrets}/job job; ln -sfn {secrets}/code exitcode\n'
             f'ln -sfn {secrets}/log output.log; rm -rf checkpoint; ln -s {secrets} checkpoint\n'
             f'ln {secrets}/code hard 2>&1 | tail -1\n'
             'exit 3\n')
    state = await owners.launch(1, "alice", plant, "n2")
    for name, text in (("job", state["job_id"]), ("code", "42"), ("log", "ROOT-SECRET")):
        (secrets / name).write_text(text + "\n")
        (secrets / name).chmod(0o600)
    (gate / "go").touch()
    obs = await owners.wait(1, "exited")
    tdir = owners.ex.task_dir(1)
    assert (tdir / "exitcode").is_symlink() and (tdir / "job").is_symlink(), sorted(os.listdir(tdir))
    # Had the service followed job -> secrets/job and exitcode -> secrets/code, it would say 42.
    assert obs.exit_code == 3, obs
    assert owners.ex._exitcode_file(1, state["job_id"], owners.accounts["alice"].uid) is None
    # The same files as hard links cannot be made (protected_hardlinks); a FIFO is not waited on.
    assert not (tdir / "hard").exists()
    os.unlink(tdir / "exitcode")
    os.unlink(tdir / "job")
    as_alice = ("runuser", "-u", "tacc-alice", "--", "sh", "-c")
    sh(*as_alice, f'cd {tdir} && echo {state["job_id"]} > job && mkfifo exitcode')
    started = time.monotonic()
    assert owners.ex._exitcode_file(1, state["job_id"], owners.accounts["alice"].uid) is None
    assert time.monotonic() - started < 1
    # A rerun keeps the run's log and checkpoint entries as they are: the links move, nothing is chowned.
    await owners.ex.cancel(1, state)
    owners.states[1] = await owners.ex.launch(owners.launch_of(1, "alice", owners.plan("echo rerun\n"), "n2",
                                                               attempt=1))
    await owners.wait(1, "exited")  # its log is alice's link to a file she cannot open: Slurm may fail the job
    for name in ("job", "code", "log"):
        st = os.lstat(secrets / name)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600), (name, st)
    assert (secrets / "log").read_text() == "ROOT-SECRET\n"
    assert os.lstat(secrets).st_uid == 0 and stat.S_IMODE(os.lstat(secrets).st_mode) == 0o755
    assert (tdir / "output.log").is_symlink()  # alice's own link, kept: the log reader refuses it (O_NOFOLLOW)
    assert (tdir / "checkpoint").is_dir() and not (tdir / "checkpoint").is_symlink()
    assert os.lstat(tdir / "checkpoint").st_uid == owners.accounts["alice"].uid


async def test_a_group_mapping_to_an_invalid_slurm_name_is_refused(accounts: dict[str, Account],
                                                                  shared_root: Path) -> None:
    o = Owners(shared_root, accounts)
    o.ex.account_map = {"*": "{group}"}
    plan = o.plan("echo never\n")
    bad = Launch(task_id=1, owner="alice", plan=plan, account=accounts["alice"], group="a b;--wrap=id",
                 placement=Placement(nodes=[NodeSlots(node="n1", gpus=[])]))
    with pytest.raises(LaunchError, match="not a valid Slurm name"):
        await o.ex.launch(bad)
    assert not o.ex.task_dir(1).exists()  # refused before anything was written or submitted
    o.ex.account_map, o.ex.qos_map = {"*": "ok"}, {"physics": "-{group}"}
    with pytest.raises(LaunchError, match="QOS for group 'physics' would be '-physics', not a valid Slurm name"):
        await o.ex.launch(Launch(task_id=2, owner="alice", plan=plan, account=accounts["alice"], group="physics",
                                 placement=Placement(nodes=[NodeSlots(node="n1", gpus=[])])))


def test_the_service_never_returns_a_root_only_file_the_job_links_as_its_log(slurm_cluster: SlurmCluster,
                                                                            open_dir: Path, tmp_path: Path) -> None:
    secret = open_dir / "secret"
    secret.write_text("ROOT-SECRET\n")
    secret.chmod(0o600)
    svc = ServiceProcess(tmp_path / "svc", "--TaccHub.executor=slurm", "--TaccHub.grace_period=1").start()
    try:
        d = write_task(tmp_path / "t", "name: swap-log\ncode: .\nentrypoint:\n  - echo before; id -un\n"
                       f"  - cd \"$TACC_TASKDIR\" && rm output.log && ln -s {secret} output.log && echo swapped\n")
        res = tcloud(svc, "alice", "submit", str(d), "--json")
        assert res.returncode == 0, res.stderr
        task_id = json.loads(res.stdout)["id"]
        api = Api(svc.url, svc.token("alice"))
        done = api.wait_status(task_id, {"succeeded", "failed"}, timeout=120)
        assert done["status"] == "succeeded", done
        assert (svc.data_dir / "tasks" / str(task_id) / "output.log").is_symlink()  # the attack took place
        status, logs = api.call("GET", f"/api/tasks/{task_id}/logs")
        assert "ROOT-SECRET" not in json.dumps(logs), (status, logs)
        out = tcloud(svc, "alice", "logs", str(task_id))
        assert "ROOT-SECRET" not in out.stdout + out.stderr, out
        assert secret.read_text() == "ROOT-SECRET\n" and secret.stat().st_uid == 0
    finally:
        svc.stop()
