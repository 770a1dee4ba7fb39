"""A partition shared with jobs tacc did not submit, and jobs that try to outlive themselves (real dev cluster).

Foreign GPUs: another account's plain ``sbatch --gres=gpu:N`` holds GPUs of a node; the executor
reads them from Slurm's allocations and the scheduler's cluster state never places on them, and
says why. A job of that account named ``tacc-<id>`` is not taken for one of ours.

Containment: the dev cluster tracks a job's processes in cgroups (``proctrack/cgroup``): what a
task leaves behind with ``setsid`` or a double fork is killed when the task ends or is cancelled.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from tacc_hub.executors.identity import Account
from tacc_hub.scheduler.cluster import ClusterState, NodeSlots, Placement
from tests.e2e.conftest import Api, ServiceProcess, tcloud, write_task
from tests.slurm.owners import Owners, sh

pytestmark = pytest.mark.timeout(600)


def sbatch_as(account: str, *args: str) -> str:
    out = sh("runuser", "-u", account, "--", "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", *args)
    return out.stdout.strip().split(";")[0]


def wait_running(job_id: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while sh("squeue", "-h", "-j", job_id, "-o", "%T", check=False).stdout.strip() != "RUNNING":
        assert time.monotonic() < deadline, sh("squeue", "-j", job_id, check=False).stdout
        time.sleep(0.2)


def processes(marker: str) -> list[int]:
    """Pids whose command line holds ``marker``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(pid))
    return found


async def test_gpus_held_by_jobs_outside_tacc_are_never_placed_on(owners: Owners,
                                                                   accounts: dict[str, Account]) -> None:
    # Ours: a tacc task of alice on n3, both GPUs. Theirs: bob's plain job on n1 (2 GPUs) and a job of
    # bob's named like one of ours on n2 (1 GPU).
    plan = owners.plan("sleep 60\n", resources={"gpus_per_node": 2})
    state = await owners.ex.launch(owners.launch_of(1, "alice", plan, "n3", gpus=[0, 1]))
    owners.states[1] = state
    foreign = sbatch_as("tacc-bob", "--nodelist=n1", "--gres=gpu:2", "--wrap", "sleep 120")
    decoy = sbatch_as("tacc-bob", "--nodelist=n2", "--gres=gpu:1", "--job-name=tacc-1", "--wrap", "sleep 120")
    try:
        for job in (state["job_id"], foreign, decoy):
            wait_running(job)
        nodes = {n.name: n for n in owners.ex.refresh_nodes()}
        assert {name: n.foreign for name, n in nodes.items()} == {"n1": 2, "n2": 1, "n3": 0, "n4": 0}, nodes
        cluster = ClusterState(owners.ex.nodes())
        cluster.allocate(1, Placement(nodes=[NodeSlots(node="n3", gpus=[0, 1])]))  # the service's own record
        assert [len(cluster.nodes[n].free) for n in ("n1", "n2", "n3", "n4")] == [0, 1, 0, 2]
        assert cluster.foreign_note() == "2 GPUs on n1 and 1 GPU on n2 are held by jobs outside tacc"
        assert cluster.place(1, 2) is not None and cluster.place(2, 2) is None  # only n4 has two free
        fit = cluster.place(1, 2)
        assert fit is not None and [s.node for s in fit.placement.nodes] == ["n4"], fit
        with pytest.raises(ValueError, match="not free"):
            cluster.allocate(2, Placement(nodes=[NodeSlots(node="n1", gpus=[0])]))
        with pytest.raises(ValueError, match="not free"):
            cluster.allocate(2, Placement(nodes=[NodeSlots(node="n2", gpus=[0, 1])]))
        assert [s["gpus_foreign"] for s in cluster.summary()] == [2, 1, 0, 0]
        # The foreign job ends: its GPUs come back at the next read of the nodes.
        sh("scancel", foreign, decoy)
        deadline = time.monotonic() + 60
        while any(n.foreign for n in owners.ex.refresh_nodes()):
            assert time.monotonic() < deadline, owners.ex.nodes()
            await asyncio.sleep(0.3)
        assert cluster.update_nodes(owners.ex.nodes()) == ["n1", "n2"]
        assert cluster.foreign_note() is None and cluster.place(3, 2) is not None
        cluster.allocate(2, Placement(nodes=[NodeSlots(node="n1", gpus=[0, 1])]))
    finally:
        sh("scancel", foreign, decoy, check=False)


def test_the_service_waits_for_gpus_a_foreign_job_holds_and_says_why(accounts: dict[str, Account],
                                                                      tmp_path: Path) -> None:
    svc = ServiceProcess(tmp_path / "svc", "--TaccHub.executor=slurm", "--TaccHub.grace_period=1",
                         "--TaccHub.node_refresh_interval=0.5").start()
    foreign = sbatch_as("tacc-bob", "--nodelist=n1", "--gres=gpu:2", "--wrap", "sleep 300")
    try:
        wait_running(foreign)
        deadline = time.monotonic() + 60
        while True:  # the service's next read of the nodes sees it
            cluster = json.loads(tcloud(svc, "ivan", "cluster", "--json").stdout)
            if {n["name"]: n["gpus_free"] for n in cluster["nodes"]}.get("n1") == 0:
                break
            assert time.monotonic() < deadline, cluster
            time.sleep(0.3)
        d = write_task(tmp_path / "t", "name: all-gpus\ncode: .\nresources: {nodes: 4, gpus_per_node: 2}\n"
                       "entrypoint:\n  - echo ran on $SLURMD_NODENAME\n")
        res = tcloud(svc, "ivan", "submit", str(d), "--json")
        assert res.returncode == 0, res.stderr
        task_id = json.loads(res.stdout)["id"]
        api = Api(svc.url, svc.token("ivan"))
        deadline = time.monotonic() + 30
        while True:
            _, task = api.call("GET", f"/api/tasks/{task_id}")
            queue = task.get("queue") or {}
            if task["status"] == "pending" and queue.get("reason"):
                break
            assert time.monotonic() < deadline, task
            time.sleep(0.3)
        assert queue["reason"] == "Resources", task
        assert "2 GPUs on n1 are held by jobs outside tacc" in queue["detail"], queue
        time.sleep(2)  # it keeps waiting while the foreign job holds them
        _, task = api.call("GET", f"/api/tasks/{task_id}")
        assert task["status"] == "pending", task
        assert sh("squeue", "-h", "-n", f"tacc-{task_id}", "-o", "%i").stdout.strip() == ""  # nothing submitted
        sh("scancel", foreign)
        done = api.wait_status(task_id, {"succeeded", "failed"}, timeout=120)
        assert done["status"] == "succeeded", done
    finally:
        sh("scancel", foreign, check=False)
        svc.stop()


async def test_nothing_a_task_leaves_behind_survives_its_end_or_its_cancel(owners: Owners) -> None:
    config = sh("scontrol", "show", "config").stdout
    assert any(line.split() == ["ProctrackType", "=", "proctrack/cgroup"] for line in config.splitlines()), config
    escape = ('setsid bash -c "exec -a tacc-escaped-$TACC_TASK_ID-a sleep 1000" </dev/null >/dev/null 2>&1 &\n'
              '( setsid bash -c "exec -a tacc-escaped-$TACC_TASK_ID-b sleep 1000" </dev/null >/dev/null 2>&1 & )\n'
              'nohup bash -c "exec -a tacc-escaped-$TACC_TASK_ID-c sleep 1000" </dev/null >/dev/null 2>&1 &\n'
              'disown -a; sleep 1; echo left-behind\n')
    leftovers: list[int] = []
    try:
        # Ends by itself: the step's cgroup is killed as the step ends.
        await owners.launch(31, "alice", escape + "exit 0\n", "n1")
        obs = await owners.wait(31, "exited")
        assert "left-behind" in owners.log(31) and obs.exit_code == 0, owners.log(31)
        deadline = time.monotonic() + 15
        while (leftovers := processes("tacc-escaped-31-")) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert leftovers == [], [Path(f"/proc/{p}/cmdline").read_bytes() for p in leftovers]
        # Cancelled while running.
        state = await owners.launch(32, "alice", escape + "sleep 300\n", "n2")
        deadline = time.monotonic() + 60
        while len(processes("tacc-escaped-32-")) < 3:
            assert time.monotonic() < deadline, owners.log(32)
            await asyncio.sleep(0.2)
        await owners.ex.cancel(32, state)
        deadline = time.monotonic() + 15
        while (leftovers := processes("tacc-escaped-32-")) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert leftovers == [], leftovers
        assert (await owners.wait(32, "exited")).reason == "cancelled"
    finally:
        for pid in processes("tacc-escaped-3"):  # only what this test started, by pid
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass

