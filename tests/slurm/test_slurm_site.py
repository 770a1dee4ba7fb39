"""The site as the live Slurm cluster says it is: nodes drained or down get no new tasks, and come back."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Api, ServiceProcess, tcloud, write_task
from tests.slurm.conftest import SlurmCluster

pytestmark = pytest.mark.timeout(600)


def scontrol_state(node: str, state: str) -> None:
    args = ["scontrol", "update", f"nodename={node}", f"state={state}"]
    if state == "drain":
        args.append("reason=tacc-test")
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)


def wait_for(what: str, check, timeout: float = 30):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture
def site_service(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[ServiceProcess]:
    svc = ServiceProcess(tmp_path / "svc", "--TaccHub.executor=slurm", "--TaccHub.grace_period=1",
                         "--TaccHub.node_refresh_interval=0.5").start()
    yield svc
    svc.stop()


def test_drained_nodes_get_no_new_tasks_and_come_back(site_service: ServiceProcess, tmp_path: Path) -> None:
    admin = Api(site_service.url, site_service.token("root", admin=True))
    api = Api(site_service.url, site_service.token("ivan"))

    def nodes() -> dict[str, dict]:
        status, out = admin.call("GET", "/api/cluster")
        assert status == 200, out
        return {n["name"]: n for n in out["nodes"]}

    first = admin.call("GET", "/api/cluster")[1]
    assert first["partitions"] == ["gpu"] and first["switches"] == {"s1": ["n1", "n2"], "s2": ["n3", "n4"]}, first
    assert [n["switch"] for n in first["nodes"]] == ["s1", "s1", "s2", "s2"], first
    d = write_task(tmp_path / "t", "name: holder\ncode: .\nresources: {gpus_per_node: 2}\n"
                   "entrypoint:\n  - sleep 300\n")
    ids: list[int] = []
    try:
        scontrol_state("n3", "drain")
        n3 = wait_for("n3 not schedulable", lambda: (lambda n: n if not n["schedulable"] else None)(nodes()["n3"]))
        assert "DRAIN" in n3["state"], n3
        out = admin.call("GET", "/api/cluster")[1]
        assert out["gpus"] == 6 and out["switches"]["s2"] == ["n3", "n4"], out  # still listed, no new work

        def submit() -> int:
            res = tcloud(site_service, "ivan", "submit", str(d), "--json")
            assert res.returncode == 0, res.stderr
            ids.append(json.loads(res.stdout)["id"])
            return ids[-1]

        for _ in range(3):  # each takes a whole node: n1, n2, n4
            api.wait_status(submit(), {"running"}, timeout=60)
        placed = {api.call("GET", f"/api/tasks/{t}")[1]["placement"]["nodes"][0]["node"]: t for t in ids}
        assert sorted(placed) == ["n1", "n2", "n4"], placed
        fourth = submit()
        time.sleep(2)  # several scheduling passes and node refreshes
        task = api.call("GET", f"/api/tasks/{fourth}")[1]
        assert task["status"] == "pending", task  # without the refresh it would be "running" on n3 (Slurm PENDING)

        # A node drained under a running task: the task keeps running and keeps its slots.
        scontrol_state("n1", "drain")
        wait_for("n1 not schedulable", lambda: not nodes()["n1"]["schedulable"])
        n1 = nodes()["n1"]
        assert n1["tasks"] == [placed["n1"]] and n1["gpus_used"] == 2, n1
        assert api.call("GET", f"/api/tasks/{placed['n1']}")[1]["status"] == "running"

        scontrol_state("n3", "resume")
        done = api.wait_status(fourth, {"running"}, timeout=60)
        assert done["placement"]["nodes"][0]["node"] == "n3", done
        assert nodes()["n3"]["schedulable"] is True
        scontrol_state("n1", "resume")
        wait_for("n1 schedulable", lambda: nodes()["n1"]["schedulable"])
    finally:
        for node in ("n1", "n3"):
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True,
                           timeout=60, check=False)  # fails harmlessly when it is not drained
        for t in ids:
            api.call("POST", f"/api/tasks/{t}/cancel")
        for t in ids:
            api.wait_status(t, {"cancelled", "failed", "succeeded"}, timeout=120)
