"""The real service with ``--TaccHub.executor=slurm`` on the dev cluster, driven by the real ``tcloud``."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, Api, ServiceProcess, tcloud, write_task
from tests.slurm.conftest import SlurmCluster

pytestmark = pytest.mark.timeout(900)


def test_a_task_submitted_with_tcloud_runs_as_a_slurm_job(slurm_service: ServiceProcess, tmp_path: Path) -> None:
    cluster = json.loads(tcloud(slurm_service, "ivan", "cluster", "--json").stdout)
    assert cluster["executor"] == "slurm" and cluster["gpus"] == 8, cluster
    assert [n["name"] for n in cluster["nodes"]] == ["n1", "n2", "n3", "n4"], cluster

    d = write_task(tmp_path / "t", "name: hello-slurm\ncode: .\nresources: {nodes: 2, gpus_per_node: 1}\n"
                   "entrypoint:\n  - echo rank-$TACC_NODE_RANK on $SLURMD_NODENAME job $SLURM_JOB_ID\n")
    res = tcloud(slurm_service, "ivan", "submit", str(d), "-f")
    assert res.returncode == 0, res.stderr + res.stdout
    assert "succeeded" in res.stderr, res.stderr
    task_id = int(res.stdout.split("submitted task ")[1].split()[0])

    show = json.loads(tcloud(slurm_service, "ivan", "show", str(task_id), "--json").stdout)
    assert show["status"] == "succeeded" and show["exit_code"] == 0, show
    job_id = show["executor_state"]["job_id"] if "executor_state" in show else None
    logs = tcloud(slurm_service, "ivan", "logs", str(task_id)).stdout
    lines = sorted(line for line in logs.splitlines() if line.startswith("rank-"))
    assert len(lines) == 2 and lines[0].startswith("rank-0 on n") and lines[1].startswith("rank-1 on n"), logs
    jobs = {line.split()[-1] for line in lines}
    assert len(jobs) == 1 and (job_id is None or jobs == {str(job_id)}), lines
    # It really was a Slurm job, named after the task, and it completed.
    fields = subprocess.run(["scontrol", "show", "job", "-o", jobs.pop()], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    assert f"JobName=tacc-{task_id} " in fields and "JobState=COMPLETED" in fields, fields


def test_cancel_through_the_service_cancels_the_slurm_job(slurm_service: ServiceProcess, tmp_path: Path) -> None:
    d = write_task(tmp_path / "c", "name: long\ncode: .\nentrypoint:\n  - echo started; sleep 300\n")
    res = tcloud(slurm_service, "ivan", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    task_id = json.loads(res.stdout)["id"]
    api = Api(slurm_service.url, slurm_service.token("ivan"))
    api.wait_status(task_id, {"running"}, timeout=120)
    res = tcloud(slurm_service, "ivan", "cancel", str(task_id))
    assert res.returncode == 0, res.stderr
    final = api.wait_status(task_id, {"cancelled"}, timeout=120)
    assert final["status"] == "cancelled", final
    names = subprocess.run(["squeue", "-h", "-o", "%j %T"], capture_output=True, text=True, timeout=60,
                           check=True).stdout
    assert f"tacc-{task_id} " not in names, names


def test_the_ddp_example_on_two_nodes_of_two_ranks(slurm_service: ServiceProcess, tmp_path: Path) -> None:
    res = tcloud(slurm_service, "alice", "submit", str(ROOT / "examples" / "ddp"), "--nodes", "2", "-f", timeout=600)
    assert res.returncode == 0, res.stderr + res.stdout
    assert "succeeded" in res.stderr, res.stderr
    for rank in range(4):
        assert f"rank {rank}/4 done: weights in sync across ranks: True" in res.stdout, res.stdout
    task_id = int(res.stdout.split("submitted task ")[1].split()[0])
    show = json.loads(tcloud(slurm_service, "alice", "show", str(task_id), "--json").stdout)
    assert show["status"] == "succeeded" and show["plan"]["runtime"] == "torchrun", show
    assert [n["node"] for n in show["placement"]["nodes"]] in (["n1", "n2"], ["n3", "n4"]), show["placement"]


def test_a_restarted_service_readopts_its_slurm_jobs(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    args = ("--TaccHub.executor=slurm", "--TaccHub.grace_period=2")
    svc = ServiceProcess(tmp_path / "svc", *args).start()
    try:
        d = write_task(tmp_path / "s", "name: survivor\ncode: .\nentrypoint:\n  - echo before\n  - sleep 6\n"
                       "  - echo after\n")
        res = tcloud(svc, "alice", "submit", str(d), "--json")
        assert res.returncode == 0, res.stderr
        task_id = json.loads(res.stdout)["id"]
        api = Api(svc.url, svc.token("alice"))
        api.wait_status(task_id, {"running"}, timeout=120)
        svc.stop(signal.SIGKILL)  # no chance to clean up; the Slurm job keeps running meanwhile
        svc2 = ServiceProcess(svc.state_dir, *args, port=svc.port)
        svc2.tokens = svc.tokens
        svc2.start()
        try:
            done = api.wait_status(task_id, {"succeeded", "failed", "lost"}, timeout=120)
            assert done["status"] == "succeeded" and done["exit_code"] == 0, done
            _, logs = api.call("GET", f"/api/tasks/{task_id}/logs")
            assert [w for w in logs["data"].split() if w in ("before", "after")] == ["before", "after"], logs
        finally:
            svc2.stop()
    finally:
        svc.stop()
