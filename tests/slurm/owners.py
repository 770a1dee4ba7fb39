"""Tasks launched as their owners' Unix accounts on the Slurm dev cluster (helpers of the tests here).

The accounts ``tacc-alice`` and ``tacc-bob`` are created by the ``accounts`` fixture (conftest.py,
``useradd -m``) when missing, and registered in Slurm's accounting under the accounts their tacc
groups map to (``ACCOUNT_MAP``).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

from tacc_hub.compiler import SiteProfile, compile_task
from tacc_hub.compiler.plan import ExecutionPlan
from tacc_hub.executors import Launch, Observation
from tacc_hub.executors.identity import Account
from tacc_hub.executors.slurm import SlurmExecutor
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.schema import spec_from_data
from tacc_hub.snapshot import CodeStore, digest_of, pack

WAIT_S = 120
USERS = {"alice": ("tacc-alice", "physics"), "bob": ("tacc-bob", "biology")}  # tacc user -> (account, group)
ACCOUNT_MAP = {"physics": "phys-{group}", "*": "{group}"}  # physics -> phys-physics; biology -> biology
QOS_MAP = {"*": "normal"}


def sh(*argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=check)


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


def sacct(job_id: str) -> list[str]:
    """user|account|qos of a job, as accounting has it (it may lag a moment behind the job's end)."""
    deadline = time.monotonic() + 30
    while True:
        out = sh("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "User,Account,QOS").stdout.split()
        if (out and "Unknown" not in out[0]) or time.monotonic() > deadline:  # the QOS comes with the job's end
            return out
        time.sleep(0.5)
