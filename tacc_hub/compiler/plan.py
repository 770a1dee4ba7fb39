"""The execution plan: what an executor needs to run a task, decided ahead of time.

Invariants:
- A plan is plain data, serialized to JSON into the store; executors read it
  and do not look at the TaskSpec again.
- Values only known at launch (placement, ports, the task's directories) are
  referenced through environment variables that the executor sets
  (``LAUNCH_ENV``), never pasted into the plan.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

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
    "TACC_NODELIST": "host names of the task's nodes, comma-separated, in node-rank order (several nodes)",
    "TACC_CROSS_SWITCH": "1 when the task's nodes hang off more than one switch (no RDMA path), else unset or 0",
    "TACC_ATTEMPT": "runs of the task before this one (0: the first; launch.sh marks later ones in the log)",
    "TACC_TENSORBOARD_PORT": "the port TensorBoard listens on, on node rank 0 at TACC_MASTER_ADDR (spec `tensorboard`)",
    "TACC_TENSORBOARD_SECRET": "TensorBoard's secret path prefix (spec `tensorboard`); launch.sh gives it to "
    "TensorBoard alone and unsets it before the program runs",
}


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EnvRef(Model):
    """An argument made of an environment variable's value plus a literal suffix."""

    env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]*$")
    suffix: str = ""


Arg = str | EnvRef
# The name of a variable a launch exports (rendered unquoted in launch.sh, so it is checked here).
VarName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


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
    env: dict[VarName, str] = Field(default_factory=dict)
    env_from: dict[VarName, VarName] = Field(
        default_factory=dict, description="VAR -> name of a launch-time variable."
    )
    cross_switch_env: dict[VarName, str] = Field(
        default_factory=dict,
        description="Exported over `env` when the executor sets TACC_CROSS_SWITCH=1: the TCP fallback "
        "(e.g. NCCL_IB_DISABLE=1) for a placement whose nodes have no RDMA path between them.",
    )
    rdma_required: bool = Field(
        False, description="network.rdma is `required`: launch.sh refuses to start when TACC_CROSS_SWITCH=1."
    )

    @model_serializer(mode="wrap")
    def _omit_unused_network(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        # The network fields are left out while unused, so that plans of sites that declare no
        # network (and their golden files) stay as they were before these fields existed.
        data: dict[str, object] = handler(self)
        if not self.cross_switch_env:
            data.pop("cross_switch_env", None)
        if not self.rdma_required:
            data.pop("rdma_required", None)
        return data


class TensorBoardPlan(Model):
    """TensorBoard beside the task (spec ``tensorboard``): launch.sh starts it on node rank 0; the executor gives it
    a port and a secret path prefix (``TACC_TENSORBOARD_PORT``/``_SECRET``; ``tensorboard_port``/``_secret`` in
    its state, for the proxy)."""

    logdir: str = Field(description="Its log directory, relative to TACC_WORKDIR (the spec's, under its workdir).")
    command: list[str] = Field(description="The site's tensorboard_command: the Python that runs TensorBoard "
                               "(first word looked up on the PATH; a trailing `-m tensorboard.main` is dropped).")


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
    tensorboard: TensorBoardPlan | None = Field(
        None, exclude_if=lambda v: v is None,  # left out while unset: plans without it are as they were
        description="TensorBoard beside the task, when its spec asks for it.",
    )
