"""Slurm jobs as their owners (real dev cluster, real Unix accounts): accounting, isolation, planted links.

The accounts ``tacc-alice`` and ``tacc-bob`` are created by the session fixture (``useradd -m``) when
missing, and registered in Slurm's accounting under the accounts their tacc groups map to. Every
attack runs where the attacker stands: inside alice's job, as alice.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tacc_hub.compiler import SiteProfile, compile_task
from tacc_hub.compiler.plan import ExecutionPlan
from tacc_hub.executors import Launch, LaunchError, Observation
from tacc_hub.executors.identity import Account, Identity
from tacc_hub.executors.slurm import SlurmExecutor
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.schema import spec_from_data
from tacc_hub.snapshot import CodeStore, digest_of, pack
from tests.slurm.conftest import SlurmCluster

pytestmark = pytest.mark.timeout(600)

WAIT_S = 120
USERS = {"alice": ("tacc-alice", "physics"), "bob": ("tacc-bob", "biology")}  # tacc user -> (account, group)
ACCOUNT_MAP = {"physics": "phys-{group}", "*": "{group}"}  # physics -> phys-physics; biology -> biology
QOS_MAP = {"*": "normal"}


def sh(*argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=check)


@pytest.fixture(scope="session")
def accounts(slurm_cluster: SlurmCluster) -> dict[str, Account]:
    """tacc user -> Account, the Unix accounts created if missing and known to Slurm's accounting."""
    for name, group in USERS.values():
        if sh("id", "-u", name, check=False).returncode != 0:
            sh("useradd", "-m", "-K", "UID_MIN=1000", name)
        slurm_account = ACCOUNT_MAP.get(group, ACCOUNT_MAP["*"]).replace("{group}", group)
        sh("sacctmgr", "-i", "add", "account", slurm_account, check=False)  # exists already: exits 1
        sh("sacctmgr", "-i", "add", "user", name, f"account={slurm_account}", check=False)
    identity = Identity(mode="owner", username_map={u: a for u, (a, _) in USERS.items()})
    found = {user: identity.account(user) for user in USERS}
    assert all(a is not None and a.uid >= 1000 for a in found.values()), found
    return {u: a for u, a in found.items() if a is not None}


class Owners:
    """Tasks launched as their owners on one executor whose root other users may pass through (0711)."""

    def __init__(self, root: Path, accounts: dict[str, Account], **kwargs: Any) -> None:
        self.root = root
        self.accounts = accounts
        self.ex = SlurmExecutor(root / "data", account_map=ACCOUNT_MAP, qos_map=QOS_MAP, grace_period=1,
                                missing_grace=5, **kwargs)
        self.code = CodeStore(root / "code")
        self.states: dict[int, dict[str, Any]] = {}
        self.site = SiteProfile(name="slurm-dev", pythons={"3.11": "/usr/bin/python3"}, default_python="3.11",
                                env_root=str(root / "envs"), code_root=str(root / "code"), max_nodes=4,
                                max_gpus_per_node=2, partitions=["gpu"])

    def plan(self, script: str, **fields: Any) -> ExecutionPlan:
        src = self.root / f"src-{time.monotonic_ns()}"
        src.mkdir()
        (src / "main.sh").write_text(script)
        data = pack(src)
        digest = digest_of(data)
        self.code.put(digest, data)
        spec = {"name": "t", "code": {"kind": "snapshot", "digest": digest, "size": len(data)},
                "entrypoint": {"argv": ["bash", "main.sh"]}, **fields}
        return compile_task(spec_from_data(spec), self.site)

    def launch_of(self, task_id: int, user: str, plan: ExecutionPlan, node: str = "n1", gpus: list[int] | None = None,
                  attempt: int = 0) -> Launch:
        return Launch(task_id=task_id, owner=user, plan=plan, attempt=attempt, account=self.accounts[user],
                      group=USERS[user][1], placement=Placement(nodes=[NodeSlots(node=node, gpus=gpus or [])]))

    async def launch(self, task_id: int, user: str, script: str, node: str = "n1", **kw: Any) -> dict[str, Any]:
        state = await self.ex.launch(self.launch_of(task_id, user, self.plan(script), node, **kw))
        self.states[task_id] = state
        return state

    async def wait(self, task_id: int, *wanted: str, timeout: float = WAIT_S) -> Observation:
        deadline = time.monotonic() + timeout
        obs = None
        while time.monotonic() < deadline:
            obs = (await self.ex.poll({task_id: self.states[task_id]}))[task_id]
            if obs.status in wanted:
                return obs
            await asyncio.sleep(0.3)
        raise AssertionError(f"task {task_id} did not reach {wanted}: {obs}; log: {self.log(task_id)!r}")

    def log(self, task_id: int) -> str:
        path = self.ex.log_path(task_id)
        return path.read_text(errors="replace") if path.is_file() and not path.is_symlink() else ""


@pytest.fixture
def shared_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="tacc-owners-"))  # not pytest's tmp dir: private to root
    root.chmod(0o711)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def owners(accounts: dict[str, Account], shared_root: Path) -> AsyncIterator[Owners]:
    o = Owners(shared_root, accounts)
    yield o
    for task_id, state in o.states.items():
        await o.ex.cancel(task_id, state)


def sacct(job_id: str) -> list[str]:
    """user|account|qos of a job, as accounting has it (it may lag a moment behind the job's end)."""
    deadline = time.monotonic() + 30
    while True:
        out = sh("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "User,Account,QOS").stdout.split()
        if (out and "Unknown" not in out[0]) or time.monotonic() > deadline:  # the QOS comes with the job's end
            return out
        time.sleep(0.5)


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
