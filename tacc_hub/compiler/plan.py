"""The execution plan: what an executor needs to run a task, decided ahead of time.

Invariants:
- A plan is plain data, serialized to JSON into the store; executors read it
  and do not look at the TaskSpec again.
- Values only known at launch (placement, ports, the task's directories) are
  referenced through environment variables that the executor sets
  (``LAUNCH_ENV``), never pasted into the plan.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tacc_hub.schema.task import CondaSpec, Resources

# Set by every executor before it runs ``launch.sh``.
LAUNCH_ENV = {
    "TACC_TASK_ID": "numeric task id",
    "TACC_TASKDIR": "the task's private directory (plan files, logs)",
    "TACC_WORKDIR": "the task's working copy of its code",
    "TACC_USERDIR": "the owner's persistent directory",
    "TACC_NODE_RANK": "0-based index of this node in the task",
    "TACC_NNODES": "number of nodes",
    "TACC_MASTER_ADDR": "host of node rank 0",
    "TACC_MASTER_PORT": "a free port on node rank 0",
    "CUDA_VISIBLE_DEVICES": "GPU slots given to the task on this node",
}


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EnvRef(Model):
    """An argument made of an environment variable's value plus a literal suffix."""

    env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]*$")
    suffix: str = ""


Arg = str | EnvRef


class EnvPlan(Model):
    kind: Literal["base", "venv", "conda"]
    digest: str = Field(description="Dependency digest; the env's directory name.")
    python: str = Field(description="Interpreter the env is built from (or used directly for `base`).")
    path: str = Field(description="Directory of the env; for `base` the interpreter's bin directory parent.")
    builder: Literal["none", "uv", "pip", "conda"] = "none"
    requirements: list[str] = Field(default_factory=list)
    conda: CondaSpec | None = None
    conda_command: str | None = None
    inherit_packages: list[str] = Field(default_factory=list)


class CodePlan(Model):
    kind: Literal["snapshot", "git"]
    archive: str | None = Field(None, description="Snapshot archive path in the code store.")
    digest: str | None = None
    url: str | None = None
    commit: str | None = None
    patch: str | None = None


class NodeLaunch(Model):
    """What runs on each node: one process (which may start the ranks itself)."""

    argv: list[Arg]
    procs_per_node: int = Field(1, ge=1, description="Ranks this launch starts on each node (torchrun: nproc).")
    env: dict[str, str] = Field(default_factory=dict)
    env_from: dict[str, str] = Field(default_factory=dict, description="VAR -> name of a launch-time variable.")


class Features(Model):
    language: Literal["python", "shell", "notebook", "other"]
    size_class: Literal["cpu", "small", "medium", "large"]
    total_gpus: int
    code_bytes: int


class ExecutionPlan(Model):
    plan_version: int = 1
    task_digest: str
    name: str
    resources: Resources
    runtime: str
    procs_per_node: int = Field(description="Ranks per node, as the runtime plugin starts them.")
    env: EnvPlan
    code: CodePlan
    workdir: str
    datasets: dict[str, str] = Field(default_factory=dict)
    outputs: list[str] = Field(default_factory=list)
    log_file: str | None = None
    files: dict[str, str] = Field(default_factory=dict, description="Files written into TACC_TASKDIR before launch.")
    launch: NodeLaunch
    features: Features
    script: str = Field(description="launch.sh: the rendered, quoted script each node runs.")
