"""What a tuxiv.conf's sbatch options map to is really honoured by the scheduler (through the controller)."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from tacc_hub.compiler import SiteProfile
from tacc_hub.executors import FakeExecutor
from tacc_hub.scheduler.policies import FifoGang
from tacc_hub.schema import spec_from_tuxiv
from tacc_hub.service.controller import Controller
from tacc_hub.snapshot import CodeStore, digest_of, pack
from tacc_hub.store import Store, TaskStatus


@pytest.fixture
def ctl(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    codes = CodeStore(tmp_path / "code")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("print(1)\n")
    data = pack(tmp_path / "src")
    codes.put(digest_of(data), data)
    site = SiteProfile(pythons={"3.11": sys.executable}, default_python="3.11", env_root=str(tmp_path / "envs"),
                       code_root=str(tmp_path / "code"), max_gpus_per_node=4, gpu_types=["v100", "a100"])
    executor = FakeExecutor(gpus=4, nodes=2)
    executor._nodes[0].gpu_type, executor._nodes[1].gpu_type = "v100", "a100"
    ctl = Controller(store, executor, site, FifoGang(), codes, poll_interval=0.05)
    ctl.digest = digest_of(data)  # type: ignore[attr-defined]
    return ctl


async def placed(ctl, *general: str) -> dict:
    spec = spec_from_tuxiv({"entrypoint": ["python", "a.py"], "code": {"kind": "snapshot", "digest": ctl.digest},
                            "runtime": {"kind": "torchrun"}, "job": {"name": "t", "general": list(general)}})
    rec = await ctl.submit("alice", spec)
    deadline = time.monotonic() + 5
    while ctl.store.get(rec.id).status != TaskStatus.RUNNING:
        assert time.monotonic() < deadline, ctl.store.get(rec.id)
        await asyncio.sleep(0.01)
    return ctl.store.get(rec.id).placement


@pytest.mark.parametrize(("general", "node"), [(("gres=gpu:1", "constraint=a100"), "n2"),
                                               (("gres=gpu:1", "constraint=v100"), "n1")])
async def test_constraint_places_on_that_gpu_type(ctl, general, node) -> None:
    await ctl.start()
    try:
        assert (await placed(ctl, *general))["nodes"][0]["node"] == node
    finally:
        await ctl.stop()


async def test_gpus_per_task_reserves_gpus_for_every_task(ctl) -> None:
    await ctl.start()
    try:
        got = await placed(ctl, "ntasks-per-node=2", "gpus-per-task=a100:2")
        assert got == {"nodes": [{"node": "n2", "gpus": [0, 1, 2, 3]}]}
    finally:
        await ctl.stop()
