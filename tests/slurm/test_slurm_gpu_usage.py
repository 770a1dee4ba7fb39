"""GPU use on the Slurm dev cluster: a step of the task's own job, as its owner, reads the task's GPUs only.

The dev cluster's GPUs are fake (gres device files that are links to /dev/null; no ConstrainDevices here),
so the step sees ``CUDA_VISIBLE_DEVICES`` set by Slurm and ``tests/fake_nvidia_smi.py`` stands in for
nvidia-smi (fixed readings for indices 0 and 1), run with Debian's Python (the accounts cannot read the
venv's). Two jobs with one GPU each on one node get indices 0 and 1: each task's usage is its own index's.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tacc_hub.executors import gpuquery
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tests.e2e.conftest import Api, ServiceProcess, tcloud, write_task
from tests.slurm.conftest import SlurmCluster
from tests.slurm.owners import Owners

pytestmark = pytest.mark.timeout(600)

FAKE = Path(__file__).resolve().parents[1] / "fake_nvidia_smi.py"
READINGS = {0: (37.0, 1000.0), 1: (91.0, 2000.0)}
TASK = 'echo "cvd=$CUDA_VISIBLE_DEVICES"; sleep 300\n'


def fake_command(where: Path) -> tuple[str, ...]:
    fake = where / "fake_nvidia_smi.py"
    shutil.copy(FAKE, fake)
    fake.chmod(0o755)
    return ("/usr/bin/python3", str(fake), *(f"{i}={u:g},{m:g}" for i, (u, m) in READINGS.items()))


async def wait_log(owners: Owners, task_id: int, prefix: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in owners.log(task_id).splitlines():
            if line.startswith(prefix):
                return line[len(prefix):]
        await asyncio.sleep(0.2)
    raise AssertionError(f"task {task_id} printed no {prefix!r}: {owners.log(task_id)!r}")


def steps(job_id: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"], capture_output=True, text=True,
                         timeout=60, check=False).stdout
    return out.split("\n")


async def test_each_tasks_step_reads_its_own_gpu_as_its_owner(owners: Owners, open_dir: Path) -> None:
    command = fake_command(open_dir)
    placement = Placement(nodes=[NodeSlots(node="n1", gpus=[0])])
    states = {1: await owners.launch(1, "alice", TASK, "n1", gpus=[0]),
              2: await owners.launch(2, "bob", TASK, "n1", gpus=[1])}
    cvd = {t: await wait_log(owners, t, "cvd=") for t in states}
    assert sorted(cvd.values()) == ["0", "1"], cvd  # Slurm chose the indices: one each
    for t, state in states.items():
        assert state["user"] in ("tacc-alice", "tacc-bob")
        usage = await owners.ex.gpu_usage(t, state, placement, command)
        assert usage == [READINGS[int(cvd[t])]], (t, cvd, usage)

    # The step runs as the job's owner (not as root): it writes who it is where everyone may write.
    drop = open_dir / "drop"
    drop.mkdir(mode=0o777)
    drop.chmod(0o777)
    who = ("/bin/sh", "-c", f'id -un > {drop}/who-$(id -u); exec "$@"', "sh", *command)
    assert await owners.ex.gpu_usage(1, states[1], placement, who) == [READINGS[int(cvd[1])]]
    assert [p.read_text().strip() for p in drop.iterdir()] == ["tacc-alice"]

    # What the step prints is bounded in size and time; a step that hangs is killed and leaves the job.
    flood = ("/usr/bin/python3", "-c", "import sys\nwhile True: sys.stdout.write('0, 99, 1\\n')")
    assert await asyncio.wait_for(owners.ex.gpu_usage(1, states[1], placement, flood), 60) == []
    hang = ("/bin/sleep", "300")
    assert await asyncio.wait_for(owners.ex.gpu_usage(2, states[2], placement, hang), 60) == []
    deadline = time.monotonic() + 120
    while any(gpuquery.STEP_NAME in line for line in steps(states[2]["job_id"])):
        assert time.monotonic() < deadline, steps(states[2]["job_id"])
        await asyncio.sleep(0.3)
    missing = ("/nonexistent/nvidia-smi",)
    assert await owners.ex.gpu_usage(1, states[1], placement, missing) == []
    # The tasks themselves ran on, untouched.
    obs = await owners.ex.poll(states)
    assert [obs[t].status for t in states] == ["running", "running"], obs


def test_the_service_samples_a_slurm_tasks_gpu(slurm_cluster: SlurmCluster, tmp_path: Path, open_dir: Path) -> None:
    command = fake_command(open_dir)
    svc = ServiceProcess(tmp_path / "svc", "--TaccHub.executor=slurm", "--TaccHub.grace_period=2",
                         "--TaccHub.gpu_sample_interval=0.5",
                         *(f"--TaccHub.gpu_query_command={arg}" for arg in command)).start()
    try:
        d = write_task(tmp_path / "t", "name: gpu-slurm\ncode: .\nresources: {gpus_per_node: 1}\n"
                       "entrypoint:\n  - echo cvd=$CUDA_VISIBLE_DEVICES; sleep 300\n")
        res = tcloud(svc, "ivan", "submit", str(d), "--json")
        assert res.returncode == 0, res.stderr
        tid = json.loads(res.stdout)["id"]
        api = Api(svc.url, svc.token("ivan"))
        api.wait_status(tid, {"running"}, timeout=120)
        deadline = time.monotonic() + 120
        while True:
            logs = tcloud(svc, "ivan", "logs", str(tid)).stdout
            cvd = [line[4:] for line in logs.splitlines() if line.startswith("cvd=")]
            _, body = api.call("GET", f"/api/tasks/{tid}/usage")
            if cvd and len(body.get("samples", [])) >= 2:
                break
            assert time.monotonic() < deadline, (logs, body)
            time.sleep(0.3)
        util, memory = READINGS[int(cvd[0])]
        assert body["gpus"] == 1 and body["mean_util"] == util, body
        assert all((s["util"], s["memory_mib"], s["gpus"]) == (util, memory, 1) for s in body["samples"]), body
        assert Api(svc.url, svc.token("bob")).call("GET", f"/api/tasks/{tid}/usage")[0] == 404
        tcloud(svc, "ivan", "cancel", str(tid))
        api.wait_status(tid, {"cancelled"}, timeout=120)
    finally:
        svc.stop()
