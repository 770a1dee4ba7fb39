"""Task environments are built on the cluster, by the job's first step, not by the hub (real dev cluster).

The requirement is one the hub's interpreter already has (PyYAML, at its installed version), and
the envs inherit the hub's site-packages as the service's do by default, so pip finds it
satisfied without the network: the test exercises the build protocol, not PyPI.
"""

from __future__ import annotations

import asyncio
import json
import site as pysite
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tacc_hub.executors.slurm import ENV_PLAN_FILE, SlurmExecutor
from tests.e2e.conftest import ServiceProcess, tcloud, write_task
from tests.slurm.conftest import SlurmCluster
from tests.slurm.test_slurm_executor import Tasks

pytestmark = pytest.mark.timeout(600)

SHOW = "import sys, yaml; print('in-env', sys.prefix, yaml.__version__)"


def job_steps(job_id: str) -> list[str]:
    """The names sacct lists for a job: the job's (briefly "allocation" in accounting), batch, each srun's command."""
    out = subprocess.run(["sacct", "-n", "-P", "-j", job_id, "-o", "JobName"], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return out.split()


async def test_a_venv_is_built_once_by_a_job_step_and_reused(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    ex = SlurmExecutor(tmp_path / "state", grace_period=1, missing_grace=5)
    t = Tasks(ex, tmp_path)
    inherit = [p for p in pysite.getsitepackages() if Path(p).is_dir()]
    t.site = t.site.model_copy(update={"inherit_packages": inherit})
    try:
        plan = t.plan({}, entrypoint={"argv": ["python", "-c", SHOW]},
                      environment={"requirements": [f"PyYAML=={yaml.__version__}"]})
        env = plan.env
        assert env.kind == "venv" and Path(env.path).parent == tmp_path / "envs", env
        # Two jobs that need the same env start together: one builds it, the other waits for it.
        await asyncio.gather(t.launch(1, plan, ("n1", [])), t.launch(2, plan, ("n2", [])))
        assert (ex.task_dir(1) / ENV_PLAN_FILE).exists()
        for task_id in (1, 2):
            obs = await t.wait(task_id, "exited")
            assert obs.exit_code == 0, t.log(task_id)
            assert f"in-env {env.path} {yaml.__version__}" in t.log(task_id), t.log(task_id)
        lines = [next(line for line in t.log(i).splitlines() if line.startswith("tacc: venv environment "))
                 for i in (1, 2)]
        assert sorted("built in" in line for line in lines) == [False, True], lines
        assert any(line.endswith(f"{env.digest} ready (reused) at {env.path}") for line in lines), lines
        ready = Path(env.path) / ".tacc-ready"
        assert ready.read_text().strip() == env.digest
        built_at = ready.stat().st_mtime_ns
        for task_id in (1, 2):  # the build ran as a step of the job, on the cluster
            deadline = time.monotonic() + 30  # accounting records the steps a moment after they end
            while (steps := job_steps(t.states[task_id]["job_id"]))[1:] != ["batch", "env", "bash"]:
                assert time.monotonic() < deadline, steps  # the env step, then the task's
                await asyncio.sleep(0.5)

        # A later task with the same dependencies reuses it as is.
        await t.launch(3, plan, ("n3", []))
        assert (await t.wait(3, "exited")).exit_code == 0, t.log(3)
        assert f"tacc: venv environment {env.digest} ready (reused) at {env.path}" in t.log(3), t.log(3)
        assert ready.stat().st_mtime_ns == built_at
    finally:
        for task_id, state in t.states.items():
            await ex.cancel(task_id, state)


async def test_an_env_that_cannot_be_built_fails_the_task_before_it_runs(slurm_cluster: SlurmCluster,
                                                                          tmp_path: Path) -> None:
    ex = SlurmExecutor(tmp_path / "state", grace_period=1, missing_grace=5)
    t = Tasks(ex, tmp_path)
    try:
        plan = t.plan({}, entrypoint={"argv": ["echo", "the task ran"]},
                      environment={"requirements": ["PyYAML==6.0.4"]})
        broken = plan.env.model_copy(update={"python": str(tmp_path / "no such python")})
        plan = plan.model_copy(update={"env": broken})
        await t.launch(4, plan, ("n4", []))
        obs = await t.wait(4, "exited")
        log = t.log(4)
        assert obs.exit_code == 1, (obs, log)
        assert f"tacc: preparing the venv environment {broken.digest} failed: creating the environment" in log, log
        assert "tacc: the environment could not be prepared (exit 1); the task did not run" in log, log
        assert "the task ran" not in log, log
        assert not (Path(broken.path) / ".tacc-ready").exists() and not Path(broken.path).exists()
    finally:
        for task_id, state in t.states.items():
            await ex.cancel(task_id, state)


def test_the_service_leaves_the_env_to_the_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    svc = ServiceProcess(tmp_path / "svc", "--TaccHub.executor=slurm", "--TaccHub.grace_period=1",
                         f"--TaccHub.slurm_node_python={sys.executable}").start()
    try:
        d = write_task(tmp_path / "t", f"name: with-env\ncode: .\nenvironment:\n"
                       f"  requirements: [PyYAML=={yaml.__version__}]\nentrypoint:\n  - python -c \"{SHOW}\"\n")
        res = tcloud(svc, "ivan", "submit", str(d), "-f")
        assert res.returncode == 0 and "succeeded" in res.stderr, res.stderr + res.stdout
        task_id = int(res.stdout.split("submitted task ")[1].split()[0])
        show = json.loads(tcloud(svc, "ivan", "show", str(task_id), "--json").stdout)
        env = show["plan"]["env"]
        assert env["kind"] == "venv" and show["status"] == "succeeded", show
        logs = tcloud(svc, "ivan", "logs", str(task_id)).stdout
        assert f"tacc: venv environment {env['digest']} built in " in logs, logs
        assert f"in-env {env['path']} {yaml.__version__}" in logs, logs
        job = (svc.data_dir / "tasks" / str(task_id) / "job.sbatch").read_text()
        assert f"{sys.executable} -m tacc_hub.executors.prepare_env" in job, job
    finally:
        svc.stop()
