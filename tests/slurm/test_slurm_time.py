"""A task's time on the Slurm dev cluster: SIGUSR1 before its limit (``scancel --signal``), extend (``scontrol
update``), through the real service and ``tcloud``."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tacc_hub.executors.sbatch import time_option
from tests.e2e.conftest import Api, ServiceProcess, tcloud, write_task

pytestmark = pytest.mark.timeout(600)

GRACE = 2  # the slurm_service fixture's --TaccHub.grace_period


def _job(task_id: int) -> dict[str, str]:
    """``scontrol show job`` of the task's Slurm job (named tacc-ID), as a dict."""
    ids = subprocess.run(["squeue", "-h", "-n", f"tacc-{task_id}", "-o", "%i"], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert len(ids) == 1, ids
    out = subprocess.run(["scontrol", "show", "job", "-o", ids[0]], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)


def _minutes(limit: str) -> int:
    """Slurm's TimeLimit ([D-]HH:MM:SS) in minutes."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d+):(\d+)", limit)
    assert m, limit
    d, h, mi, _ = (int(x or 0) for x in m.groups())
    return d * 1440 + h * 60 + mi


def test_sigusr1_before_the_limit_and_extend_updates_the_job(slurm_service: ServiceProcess, tmp_path: Path) -> None:
    d = write_task(tmp_path / "t", "name: timed\ncode: .\nentrypoint:\n"
                   "  - trap 'date +%s > \"$TACC_CHECKPOINT_DIR/ckpt\"; echo got-usr1' USR1\n"
                   "  - echo \"deadline=$TACC_DEADLINE\"\n"
                   "  - while true; do sleep 0.2; done\n"
                   "resources: {time_limit: 70}\nqos: {warn_before: 60}\n")
    res = tcloud(slurm_service, "ivan", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    tid = int(json.loads(res.stdout)["id"])
    api = Api(slurm_service.url, slurm_service.token("ivan"))
    try:
        running = api.wait_status(tid, {"running"}, timeout=120)
        deadline = running["deadline"]
        assert _minutes(_job(tid)["TimeLimit"]) == int(time_option(70))
        # SIGUSR1 at deadline - 60 s: the task's trap writes its checkpoint, before the limit.
        ckpt = slurm_service.data_dir / "tasks" / str(tid) / "checkpoint" / "ckpt"
        end = time.monotonic() + 90
        while not (ckpt.exists() and ckpt.read_text().strip()) and time.monotonic() < end:
            time.sleep(0.2)
        assert ckpt.exists(), "no checkpoint: SIGUSR1 did not reach the task"
        at = int(ckpt.read_text())
        assert deadline - 60 - 5 <= at < deadline, (at, deadline)
        assert api.call("GET", f"/api/tasks/{tid}")[1]["status"] == "running"
        # Extend by 10 minutes: the job's TimeLimit follows (the run's new limit, grace and a minute's margin).
        res = tcloud(slurm_service, "ivan", "extend", str(tid), "10m")
        assert res.returncode == 0, res.stderr
        assert "time limit now 0:11:10" in res.stdout, res.stdout
        assert _minutes(_job(tid)["TimeLimit"]) == int(time_option(670 + GRACE + 60))
        shown = api.call("GET", f"/api/tasks/{tid}")[1]
        assert shown["time_limit"] == 670 and shown["deadline"] == pytest.approx(deadline + 600)
        # A task that is not one's own cannot be extended (404), nor can the job be touched that way.
        status, _ = Api(slurm_service.url, slurm_service.token("rita")).call(
            "POST", f"/api/tasks/{tid}/extend", {"seconds": 600})
        assert status == 404
        assert _minutes(_job(tid)["TimeLimit"]) == int(time_option(670 + GRACE + 60))
    finally:
        tcloud(slurm_service, "ivan", "cancel", str(tid))
    api.wait_status(tid, {"cancelled"}, timeout=120)
    log = tcloud(slurm_service, "ivan", "logs", str(tid)).stdout
    assert "got-usr1" in log, log
    seen = re.search(r"deadline=(\d+)", log)
    assert seen and abs(int(seen.group(1)) - deadline) <= 5, log  # TACC_DEADLINE: launch time + limit


def test_the_warning_spares_a_task_that_does_not_trap_it(slurm_service: ServiceProcess, tmp_path: Path) -> None:
    """On Slurm too (one ``srun --overlap`` step per node, ``slurm_warn``): a task without a SIGUSR1 handler is
    not sent the warning, and runs to its end."""
    d = write_task(tmp_path / "u", "name: untrapped\ncode: .\nentrypoint:\n"
                   "  - sleep 35\n"
                   "  - echo survived-the-warning\n"
                   "resources: {time_limit: 70}\nqos: {warn_before: 60}\n")
    res = tcloud(slurm_service, "ivan", "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    tid = int(json.loads(res.stdout)["id"])
    api = Api(slurm_service.url, slurm_service.token("ivan"))
    api.wait_status(tid, {"running"}, timeout=120)
    done = api.wait_status(tid, {"succeeded", "failed"}, timeout=120)
    assert done["status"] == "succeeded", done
    log = tcloud(slurm_service, "ivan", "logs", str(tid)).stdout
    assert "survived-the-warning" in log, log
    service_log = (slurm_service.state_dir / "service.log").read_text(errors="replace")
    assert f"task {tid}: SIGUSR1 sent" in service_log  # the warning was given (to nobody: nothing traps it)
