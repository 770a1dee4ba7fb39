"""The DDP example, submitted with the real CLI to the real service, followed to SUCCEEDED."""

from __future__ import annotations

import json

from .conftest import ROOT, tcloud

NUMPY_WARNING = "Failed to initialize NumPy"


def test_ddp_example_runs_to_success_with_both_ranks(service, tmp_path):
    res = tcloud(service, "alice", "submit", str(ROOT / "examples" / "ddp"), "-f")
    assert res.returncode == 0, res.stderr + res.stdout
    assert NUMPY_WARNING not in res.stdout + res.stderr  # torch without numpy warns once per process
    for rank in (0, 1):
        assert f"rank {rank}/2 done: weights in sync across ranks: True" in res.stdout
        assert f"rank {rank}/2 epoch 2 loss" in res.stdout
    assert "succeeded" in res.stderr
    task_id = int(res.stdout.split("submitted task ")[1].split()[0])

    show = json.loads(tcloud(service, "alice", "show", str(task_id), "--json").stdout)
    assert show["status"] == "succeeded" and show["exit_code"] == 0
    assert show["plan"]["runtime"] == "torchrun"
    assert show["plan"]["env"]["kind"] == "venv"

    dest = tmp_path / "dl"
    res = tcloud(service, "alice", "download", str(task_id), str(dest))
    assert res.returncode == 0, res.stderr
    # The task's outputs land where they were in its working directory, next to its log.
    assert (dest / "outputs" / "model.pt").stat().st_size > 0
    assert not (dest / "outputs" / "outputs").exists()
    assert "rank 1/2 done" in (dest / "output.log").read_text()
    assert res.stdout.strip() == f"2 file(s) in {dest}"  # output.log and outputs/model.pt, not directories


def test_tuxiv_twin_runs_to_success(service):
    res = tcloud(service, "alice", "submit", str(ROOT / "examples" / "ddp" / "tuxiv.conf"), "-f")
    assert res.returncode == 0, res.stderr + res.stdout
    assert NUMPY_WARNING not in res.stdout + res.stderr
    assert "rank 0/2 done: weights in sync across ranks: True" in res.stdout
    assert "rank 1/2 done: weights in sync across ranks: True" in res.stdout


def test_dry_run_prints_the_plan_and_submits_nothing(service):
    before = json.loads(tcloud(service, "alice", "ps", "--json").stdout)["total"]
    res = tcloud(service, "alice", "submit", str(ROOT / "examples" / "ddp"), "--dry-run", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert "torch.distributed.run" in out["plan"]["script"]
    assert "--nproc-per-node=2" in out["plan"]["script"]
    spec = json.loads(tcloud(service, "alice", "spec", str(ROOT / "examples" / "ddp")).stdout)
    assert spec["digest"] == out["digest"]
    assert json.loads(tcloud(service, "alice", "ps", "--json").stdout)["total"] == before
