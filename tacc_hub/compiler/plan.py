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
    "TACC_ARRAY_ID": "the array the task is an element of (Launch.array_id; unset for a task of its own)",
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


class InputPlan(Model):
    """Files of an earlier task copied into this one's work directory before its program starts (spec ``inputs``).

    From a task: ``<path>`` in that task's work directory is copied to ``<to>`` in this task's. From an array:
    each element's ``<path>`` to ``$TACC_WORKDIR/<to>/<index>`` (a directory's contents there, a file as
    ``<to>/<index>/<its name>``); the elements' task ids are in ``tasks`` ([index, id] pairs), which the
    service fills in (``with_array_inputs``) once the array's elements exist: the compiler cannot know them.
    """

    task: int | None = Field(None, description="The producing task's id.")
    array: int | None = Field(None, description="The producing array's id.")
    path: str = Field(description="In the producer's work directory (validated RelPath, normalized).")
    to: str = Field(description="In this task's work directory (normalized; default: path).")
    tasks: list[tuple[int, int]] = Field(
        default_factory=list, exclude_if=lambda v: not v,
        description="An array input's elements: [index, task id], in index order; filled in by the service.",
    )


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
    # Issue 20; each left out while unset, as tensorboard.
    array_env: dict[VarName, str] = Field(
        default_factory=dict, exclude_if=lambda v: not v,
        description="An array element's TACC_ARRAY_INDEX, TACC_ARRAY_SIZE and TACC_PARAM_<NAME> (also in launch.sh; "
                    "params.json is in `files`). TACC_ARRAY_ID is the executor's (Launch.array_id).",
    )
    inputs: list[InputPlan] = Field(
        default_factory=list, exclude_if=lambda v: not v,
        description="Copied into the work directory, as the task's user, once, before any node starts the program.",
    )


def with_array_inputs(plan: ExecutionPlan, elements: dict[int, list[tuple[int, int]]]) -> ExecutionPlan:
    """``plan`` with the element ids of each array input filled in: ``elements[array id]`` = [(index, task id)].

    For the service (a pipeline step consuming an array step's outputs, a spec with ``inputs: [{array: ID}]``):
    it knows the elements once they are inserted. An array not in ``elements`` is left as it is (its launch then
    fails, naming the input).
    """
    if not any(i.array is not None for i in plan.inputs):
        return plan
    inputs = [i.model_copy(update={"tasks": sorted((int(x), int(t)) for x, t in elements[i.array])})
              if i.array is not None and i.array in elements else i for i in plan.inputs]
    return plan.model_copy(update={"inputs": inputs})
