"""Golden launch scripts: compiled plans are compared byte for byte with tests/golden/.

Each case is compiled for the fixed test site (fake paths; nothing taken from
this machine) and both ``plan.script`` (``<case>.launch.sh``) and the whole plan
(``<case>.plan.json``) must equal the committed files.

After an intended change to the compiler, a runtime plugin or the schema,
regenerate the files and review the diff before committing it:

    TACC_UPDATE_GOLDEN=1 python -m pytest tests/unit/test_golden.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tacc_hub.compiler import SiteProfile, compile_task
from tacc_hub.executors.sbatch import prepare_env_argv, render_batch
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.schema import TaskSpec

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
UPDATE = os.environ.get("TACC_UPDATE_GOLDEN") == "1"
GIT = {"kind": "git", "url": "https://example.org/lab/model.git", "commit": "0123456789abcdef0123456789abcdef01234567"}

CASES: dict[str, dict[str, Any]] = {
    # an array's element (issue 20): its parameters (hostile text among them) as TACC_PARAM_* and params.json,
    # and an input from an earlier task copied in before the program starts
    "array-element-inputs": {
        "entrypoint": {"argv": ["python", "train.py", "--lr=0.001", "--note", "$(x) `y` 'q'"]},
        "array_element": {"index": 3, "size": 8, "params": {"lr": 0.001, "note": "$(x) `y` 'q'\n2nd", "on": True}},
        "inputs": [{"task": 5, "path": "outputs/data", "to": "data"}],
    },
    "plain-argv": {
        "entrypoint": {"argv": ["python", "train.py", "--epochs", "3", "--note", "it's $(fine)"]},
    },
    "plain-shell": {
        "code": GIT,
        "entrypoint": {"shell": ["echo start", "python train.py --epochs 3 | tee out.txt"]},
        "resources": {"nodes": 2, "gpus_per_node": 1, "time_limit": "30m"},
    },
    "torchrun-python": {
        "entrypoint": {"argv": ["python", "train.py", "--lr", "0.1"]},
        "runtime": {"kind": "torchrun", "options": {"max_restarts": 2}},
        "resources": {"gpus_per_node": 4, "gpu_type": "a100", "partition": "gpu", "memory": "64G"},
    },
    "torchrun-two-nodes": {
        "entrypoint": {"argv": ["python", "train.py", "--epochs", "3"]},
        "runtime": {"kind": "torchrun"},
        "resources": {"nodes": 2, "tasks_per_node": 2},
    },
    "torchrun-shell": {
        "entrypoint": {"shell": ["cd src", "python -m pkg.train --config ${TACC_WORKDIR}/cfg.yaml"]},
        "runtime": {"kind": "torchrun"},
        "resources": {"gpus_per_node": 2, "tasks_per_node": 2},
    },
    "deepspeed-python": {
        "entrypoint": {"argv": ["python", "train.py", "--deepspeed_config", "ds config.json", "--note", "it's $(x)"]},
        "runtime": {"kind": "deepspeed"},
        "resources": {"gpus_per_node": 4},
    },
    "deepspeed-two-nodes-module": {
        "entrypoint": {"argv": ["python", "-m", "pkg.train", "--zero", "3"]},
        "runtime": {"kind": "deepspeed", "options": {"no_local_rank": True, "nproc_per_node": 2}},
        "resources": {"nodes": 2, "gpus_per_node": 2},
    },
    "deepspeed-rdma-required": {
        "entrypoint": {"shell": ["python train.py --deepspeed"]},
        "runtime": {"kind": "deepspeed"},
        "resources": {"nodes": 2, "gpus_per_node": 8},
        "network": {"rdma": "required"},
    },
    "horovod-single": {
        "entrypoint": {"argv": ["python", "train.py", "--batch", "64"]},
        "runtime": {"kind": "horovod"},
        "resources": {"gpus_per_node": 2},
    },
    "horovod-two-nodes-tcp-site": {
        "entrypoint": {"argv": ["python", "train.py", "--tag", "a b; $(touch /tmp/pwned) `id` 'q' \"dq\""]},
        "runtime": {"kind": "horovod", "options": {"launcher": "mpirun"}},
        "resources": {"nodes": 2, "gpus_per_node": 4},
    },
    "mpi-two-nodes-srun": {
        "entrypoint": {"argv": ["./solver", "--grid", "1024"]},
        "runtime": {"kind": "mpi", "options": {"launcher": "srun", "srun_mpi": "pmi2"}},
        "resources": {"nodes": 2, "tasks_per_node": 16},
    },
    "mpi-single": {
        "entrypoint": {"argv": ["./solver"]},
        "runtime": {"kind": "mpi"},
        "resources": {"tasks_per_node": 4},
    },
    "byteps-single": {
        "entrypoint": {"argv": ["python", "train.py"]},
        "runtime": {"kind": "byteps"},
        "resources": {"gpus_per_node": 2},
    },
    "byteps-two-nodes-rdma": {
        "entrypoint": {"argv": ["python", "train.py", "--epochs", "3"]},
        "runtime": {"kind": "byteps", "options": {"servers": "every_node"}},
        "resources": {"nodes": 2, "gpus_per_node": 8},
    },
    "torchrun-two-nodes-rdma": {
        "entrypoint": {"argv": ["python", "train.py"]},
        "runtime": {"kind": "torchrun"},
        "resources": {"nodes": 2, "gpus_per_node": 8},
    },
    "plain-rdma-off": {
        "entrypoint": {"argv": ["python", "train.py"]},
        "resources": {"nodes": 2, "gpus_per_node": 1},
        "network": {"rdma": "off"},
    },
    "env-datasets-venv": {
        "entrypoint": {"argv": ["python", "-u", "main.py"]},
        "workdir": "experiments/run 1",
        "environment": {
            "python": "3.12",
            "requirements": ["torch==2.3.1", "numpy==2.0.0"],
            "variables": {"WANDB_MODE": "offline", "NOTE": "a b; $(c)", "A_FIRST": "1"},
            "modules": ["cuda/12.1"],
        },
        "datasets": ["mnist", "imagenet"],
        "outputs": ["ckpt", "logs"],
        "log_file": "logs/run.log",
        "qos": {"class": "low", "preemptible": True},
    },
}


# Site changes per case (the network cases): an RDMA site, and one that has TCP only.
RDMA_SITE = {"rdma": True, "ib_hca": "mlx5_0:1,mlx5_1:1", "ib_gid_index": 3, "socket_ifname": "ib0"}
CASE_SITES: dict[str, dict[str, Any]] = {
    "deepspeed-rdma-required": RDMA_SITE,
    "byteps-two-nodes-rdma": RDMA_SITE,
    "torchrun-two-nodes-rdma": RDMA_SITE,
    "plain-rdma-off": RDMA_SITE,
    "horovod-two-nodes-tcp-site": {"rdma": False, "socket_ifname": "eth0"},
}


# Slurm batch jobs (``executors/sbatch.py``): <case>.sbatch is the script, whose fourth line lists
# the sbatch options as JSON. Fixed task dirs and launch variables; the hostile case puts shell
# metacharacters, quotes and a newline in the task name, a site variable and the task dir.
HOSTILE = "a b; $(touch /tmp/pwned) `id` 'q' \"dq\" \\ *\n2nd line & | > <"
SBATCH_CASES: dict[str, dict[str, Any]] = {
    "slurm-single": {
        "plan": "plain-argv", "nodes": [("n2", [1])], "dir": "/srv/tacc/tasks/7", "env": {}, "partition": None,
    },
    "slurm-two-node-hostile": {
        "plan": "env-datasets-venv", "nodes": [("n1", [0, 1]), ("n3", [0, 1])], "name": HOSTILE,
        "dir": f"/srv/ta cc/{HOSTILE}/tasks/8", "env": {"SITE_NOTE": HOSTILE, "HTTP_PROXY": "http://proxy:3128"},
        "partition": "gpu", "resources": {"nodes": 2, "gpus_per_node": 2, "memory": 2048, "time_limit": 5430,
                      "cpus_per_task": 3},
        # its venv is built by the job's first step, with a hostile interpreter path and PYTHONPATH
        "env_step": (f"/opt/py {HOSTILE}/bin/python3", f"/opt/tacc {HOSTILE}"),
    },
    # the owner's group mapped to Slurm's --account and --qos (the Slurm executor's account_map / qos_map)
    "slurm-array-inputs": {
        "plan": "array-element-inputs", "nodes": [("n2", [0])], "dir": "/srv/tacc/tasks/12", "env": {},
        "partition": None,
    },
    "slurm-account-qos": {
        "plan": "plain-argv", "nodes": [("n4", [])], "dir": "/srv/tacc/tasks/9", "env": {}, "partition": "gpu",
        "account": "phys-lab_1.a", "qos": "normal",
    },
}


def _check(path: Path, text: str) -> None:
    if UPDATE:
        path.write_text(text)
        return
    assert path.exists(), f"{path} is missing; run TACC_UPDATE_GOLDEN=1 python -m pytest {__file__}"
    assert text == path.read_text(), f"{path.name} differs from the compiled output (see the module docstring)"


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str, spec: Callable[..., TaskSpec], site_with: Callable[..., SiteProfile]) -> None:
    plan = compile_task(spec(name=case, **CASES[case]), site_with(**CASE_SITES.get(case, {})))
    _check(GOLDEN / f"{case}.launch.sh", plan.script)
    _check(GOLDEN / f"{case}.plan.json", plan.model_dump_json(indent=2) + "\n")


def test_case_sites_name_cases() -> None:
    assert set(CASE_SITES) <= set(CASES)


def test_no_stale_golden_files() -> None:
    expected = {f"{c}.launch.sh" for c in CASES} | {f"{c}.plan.json" for c in CASES}
    expected |= {f"{c}.sbatch" for c in SBATCH_CASES}
    assert {p.name for p in GOLDEN.iterdir()} <= expected


@pytest.mark.parametrize("case", sorted(SBATCH_CASES))
def test_golden_sbatch(case: str, spec: Callable[..., TaskSpec], site: SiteProfile) -> None:
    c = SBATCH_CASES[case]
    plan = compile_task(spec(name=c["plan"], **CASES[c["plan"]]), site)
    if "resources" in c:
        plan = plan.model_copy(update={"resources": plan.resources.model_copy(update=c["resources"])})
    if "name" in c:
        plan = plan.model_copy(update={"name": c["name"]})
    tdir = Path(c["dir"])
    env = {"TACC_TASK_ID": tdir.name, "TACC_TASKDIR": str(tdir), "TACC_WORKDIR": str(tdir / "work"),
           "TACC_MASTER_PORT": "29500", **c["env"]}
    step = None
    if "env_step" in c:
        assert plan.env.kind == "venv"
        step = prepare_env_argv(*c["env_step"], tdir / "env-plan.json")
    job = render_batch(task_id=int(tdir.name), plan=plan, task_dir=tdir, env=env, partition=c["partition"],
                       placement=Placement(nodes=[NodeSlots(node=n, gpus=g) for n, g in c["nodes"]]), env_step=step,
                       account=c.get("account"), qos=c.get("qos"))
    _check(GOLDEN / f"{case}.sbatch", job.script)
    assert json.loads(job.script.splitlines()[3][2:]) == job.options
