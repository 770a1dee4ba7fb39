"""TaccSpawner in a real JupyterHub on the Slurm dev cluster: a user's server is a Slurm job of a tacc task."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Api, ServiceProcess
from tests.hub.conftest import SpawnerHub
from tests.slurm.conftest import SlurmCluster

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def slurm_hub(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[tuple[SpawnerHub, ServiceProcess]]:
    svc = ServiceProcess(tmp_path / "svc", "--TaccHub.executor=slurm", "--TaccHub.grace_period=2").start()
    hub = None
    try:
        hub = SpawnerHub(tmp_path / "hub", svc.url, {"sam": svc.token("sam")}).start()
        yield hub, svc
    finally:
        if hub is not None:
            hub.stop()
        svc.stop()


def test_a_server_runs_as_a_slurm_job_survives_a_slurm_outage_and_stops_with_it(
        slurm_hub: tuple[SpawnerHub, ServiceProcess], slurm_cluster: SlurmCluster) -> None:
    hub, svc = slurm_hub
    assert hub.api.post(f"{hub.url}/hub/api/users/sam", timeout=10).status_code == 201
    began = time.monotonic()
    r = hub.api.post(f"{hub.url}/hub/api/users/sam/server", json={"gpus": 1, "time_limit": "1h"}, timeout=30)
    assert r.status_code == 202, r.text
    events = hub.progress("sam", timeout=120)
    hub.wait_ready("sam", timeout=120)
    ready_s = time.monotonic() - began
    assert events[-1].get("ready") is True, events
    task_id = int(hub.user("sam")["servers"][""]["state"]["task_id"])
    api = Api(svc.url, svc.token("sam"))
    _, task = api.call("GET", f"/api/tasks/{task_id}")
    assert task["status"] == "running" and task["placement"]["nodes"][0]["node"] in ("n1", "n2", "n3", "n4"), task
    jobs = subprocess.run(["squeue", "-h", "-o", "%j %T"], capture_output=True, text=True, timeout=60,
                          check=True).stdout
    assert f"tacc-{task_id} RUNNING" in jobs, jobs
    assert hub.api.get(f"{hub.url}/user/sam/api", timeout=10).status_code == 200

    # slurmctld down: the service's squeue polls fail, the hub keeps polling the spawner (every 1 s here);
    # the server is not taken for dead, and its job keeps running on its node.
    down = slurm_cluster.script("stop-ctld", timeout=300)
    assert down.returncode == 0, down.stderr
    try:
        time.sleep(8)
        server = hub.user("sam")["servers"].get("")
        assert server and server["ready"], server
        assert hub.api.get(f"{hub.url}/user/sam/api", timeout=10).status_code == 200
        _, task = api.call("GET", f"/api/tasks/{task_id}")
        assert task["status"] == "running", task
    finally:
        up = slurm_cluster.script("start-ctld", timeout=300)
        assert up.returncode == 0, up.stderr
    assert hub.api.delete(f"{hub.url}/hub/api/users/sam/server", timeout=60).status_code in (202, 204)
    assert api.wait_status(task_id, {"cancelled", "failed", "succeeded"}, timeout=120)["status"] == "cancelled"
    jobs = subprocess.run(["squeue", "-h", "-o", "%j %T"], capture_output=True, text=True, timeout=60,
                          check=True).stdout
    assert f"tacc-{task_id} " not in jobs, jobs
    print(f"sam on Slurm: POST to ready {ready_s:.2f} s")
