"""The real Slurm dev cluster (``scripts/slurm-dev.sh``), started once per test session.

When ``TACC_SLURM_DIR`` names a state directory whose cluster is already up, the tests use it
and leave it running (fast reruns while developing: ``scripts/slurm-dev.sh up`` once, then
``TACC_SLURM_DIR=<repo>/.slurm-dev pytest tests/slurm``). Otherwise the fixture brings a
cluster up in a fresh directory under /tmp (not pytest's tmp dir: that one is private to root,
and munged and MariaDB run as their own users) on a block of free ports, and brings it down and
removes the directory at the end. ``SLURM_CONF`` is set in ``os.environ`` for the session, so
plain ``sbatch``/``squeue`` calls reach this cluster. There is no skip: when the cluster cannot
come up, the tests fail with the script's output.

``accounts`` (session): the Unix accounts tacc-alice and tacc-bob, created with ``useradd -m`` when
missing and registered in Slurm's accounting; ``owners``: an executor whose tasks run as them
(``tests/slurm/owners.py``), in a directory under /tmp that they may pass through (0711).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tacc_hub.executors.identity import Account, Identity
from tests.slurm.owners import ACCOUNT_MAP, USERS, Owners, sh

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "slurm-dev.sh"
# slurm-dev.sh uses base+6 .. base+14 (MariaDB, slurmctld, slurmdbd, slurmd n1..n4).
PORT_OFFSETS = (6, 7, 9, 11, 12, 13, 14)
UP_TIMEOUT_S = 900  # a cold start may install Debian packages first


@dataclass(frozen=True)
class SlurmCluster:
    state_dir: Path
    conf: Path  # the SLURM_CONF every Slurm command of the tests uses
    started_here: bool

    def script(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run scripts/slurm-dev.sh CMD --state-dir <this cluster's dir>."""
        return subprocess.run(
            [str(SCRIPT), *args, "--state-dir", str(self.state_dir)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _ports_free(base: int) -> bool:
    for off in PORT_OFFSETS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", base + off))
            except OSError:
                return False
    return True


def _free_port_base() -> int:
    for _ in range(200):
        base = random.randrange(20000, 30000, 20)
        if _ports_free(base):
            return base
    raise RuntimeError("no block of free ports for the Slurm dev cluster")


def _run_script(cmd: str, state_dir: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), cmd, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )

if TYPE_CHECKING:
    from tests.e2e.conftest import ServiceProcess


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    env = dict(os.environ)
    env_dir = os.environ.get("TACC_SLURM_DIR")
    if env_dir:
        state_dir = Path(env_dir).resolve()
        started_here = _run_script("status", state_dir, env, 120).returncode != 0
        cleanup_dir = False
    else:
        state_dir = Path(tempfile.mkdtemp(prefix="tacc-slurm-"))
        started_here = True
        cleanup_dir = True
    old_conf = os.environ.get("SLURM_CONF")
    try:
        if started_here:
            errors = []
            for _ in range(3):  # a free port can be taken between our probe and the daemons' bind
                if not env_dir and "TACC_SLURM_PORT_BASE" not in os.environ:
                    env["TACC_SLURM_PORT_BASE"] = str(_free_port_base())
                proc = _run_script("up", state_dir, env, UP_TIMEOUT_S)
                if proc.returncode == 0:
                    break
                errors.append(proc.stderr.strip())
                _run_script("down", state_dir, env, 300)
            else:
                pytest.fail(
                    "could not bring the Slurm dev cluster up with scripts/slurm-dev.sh:\n" + "\n---\n".join(errors),
                    pytrace=False,
                )
            env_line = proc.stdout.strip().splitlines()[-1]
        else:
            env_line = _run_script("status", state_dir, env, 120).stdout.strip().splitlines()[-1]
        assert env_line.startswith("export SLURM_CONF="), env_line
        conf = Path(env_line.removeprefix("export SLURM_CONF="))
        os.environ["SLURM_CONF"] = str(conf)
        yield SlurmCluster(state_dir=state_dir, conf=conf, started_here=started_here)
    finally:
        if old_conf is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old_conf
        if started_here:
            _run_script("down", state_dir, env, 300)
        if cleanup_dir:
            shutil.rmtree(state_dir, ignore_errors=True)


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


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every account can read (tasks run as their owners cannot reach pytest's tmp dir)."""
    path = Path(tempfile.mkdtemp(prefix="tacc-open-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


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


@pytest.fixture
def slurm_service(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[ServiceProcess]:
    """A real service with the Slurm executor on the dev cluster (its own state; 2 s cancel grace)."""
    from tests.e2e.conftest import ServiceProcess

    svc = ServiceProcess(tmp_path / "svc", "--TaccHub.executor=slurm", "--TaccHub.grace_period=2").start()
    yield svc
    svc.stop()
