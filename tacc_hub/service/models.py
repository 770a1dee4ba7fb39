"""Request and response bodies of the REST API, as pydantic models (the OpenAPI document is generated from them)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt


class ErrorField(BaseModel):
    field: str
    message: str


class ErrorOut(BaseModel):
    status: int
    message: str
    errors: list[ErrorField] = Field(default_factory=list)


class QueueOut(BaseModel):
    """Where a waiting task stands (predictions, not promises)."""

    reason: str = Field(description="Resources, Quota, Priority or Topology; OverQuota when it can never start "
                        "under the quotas in force (a quota lowered below what it needs: more GPUs than a cap, or "
                        "more GPU-hours, GPUs x time limit, than a whole budget): it stays pending, with no "
                        "estimate, and starts as usual once the quota is raised (or cancel it); Unavailable while "
                        "the executor cannot reach its cluster (nothing is launched meanwhile; detail says since "
                        "when).")
    position: int = Field(description="1 = the next task to start (tasks a quota holds back come after the rest).")
    estimated_start: float | None = Field(None, description="Seconds since the epoch; null when unknown "
                                          "(e.g. a GPU-hour budget is used up, or OverQuota).")
    detail: str = Field("", description="For people: e.g. \"needs 4 GPUs; 2 free\"; for OverQuota the limit and "
                        "by how much, as a submit over it is refused; at a user's GPU cap, which of the user's "
                        "running tasks hold it (the user's Jupyter server by name).")


class TaskOut(BaseModel):
    id: int
    owner: str
    name: str
    status: str
    digest: str
    reason: str | None = None
    exit_code: int | None = None
    submitted_at: float
    gpus_requested: int = Field(0, description="GPUs the task asked for in all (nodes x gpus_per_node).")
    started_at: float | None = None
    finished_at: float | None = None
    placement: dict[str, Any] | None = None
    cancel_requested: bool = False
    queue: QueueOut | None = Field(None, description="Waiting tasks only: reason, position, estimated start.")
    time_limit: int | None = Field(None, description="Seconds the current run may last: the plan's limit plus "
                                   "this run's extensions (a run started again starts from the plan's).")
    deadline: float | None = Field(None, description="Running tasks: when the run's time limit ends (epoch s).")
    time_left: float | None = Field(None, description="Running tasks: seconds until the deadline.")
    attempt: int = Field(0, description="The run: 0 is the first (TACC_ATTEMPT); of a waiting task, the next one; "
                         "of an ended task, its last one.")
    max_restarts: int = Field(0, description="qos.max_restarts: how many times a failed run is started again.")
    array_id: int | None = Field(None, description="The array it is an element of (the array's id is its first "
                                 "element's task id); null for a task of its own.")
    array_index: int | None = Field(None, description="Its index in that array (TACC_ARRAY_INDEX).")
    pipeline_id: int | None = Field(None, description="The pipeline it is a step (or a step's element) of.")
    spec: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None


class ArrayOut(BaseModel):
    """An array of tasks (a range, list or grid of one spec) and where its elements stand."""

    id: int = Field(description="The array's id: its first element's task id (as Slurm's array job id).")
    owner: str
    name: str
    size: int = Field(description="How many elements it has.")
    max_running: int | None = Field(None, description="At most this many elements queued or running at once.")
    pipeline_id: int | None = Field(None, description="The pipeline it is a step of, if any.")
    step: str | None = Field(None, description="Its step's name in that pipeline.")
    created_at: float
    status: str = Field(description="running if any element is starting or running, else pending if any waits, "
                        "else succeeded if all did, else failed if any failed or was lost, else cancelled.")
    counts: dict[str, int] = Field(default_factory=dict, description="Elements per status.")
    running: int = 0
    waiting: int = 0
    done: int = 0
    failed: int = 0
    reason: str | None = Field(None, description='For people: "12 of 50 running, 38 waiting: Priority".')


class ArrayCancelOut(ArrayOut):
    cancelled: int = Field(0, description="Elements this request moved to cancelled or cancelling.")


class ArrayDetailOut(ArrayOut):
    tasks: list[TaskOut] = Field(description="Its elements in index order (without spec and plan); with "
                                 "state= or index= only those.")


class ArrayListOut(BaseModel):
    arrays: list[ArrayOut]
    next_before: int | None = Field(None, description="Pass as `before` to get the next page; null on the last.")


class SubmittedOut(TaskOut):
    """What a submit answers: the task; for an array, its first element, with the array and every element's id."""

    array: ArrayOut | None = Field(None, description="The array, when the spec carried `array`.")
    task_ids: list[int] | None = Field(None, description="An array's element ids, in index order.")


class PipelineStepOut(BaseModel):
    name: str
    needs: list[str] = Field(default_factory=list)
    task_id: int | None = Field(None, description="The step's task; null when the step is an array.")
    array_id: int | None = Field(None, description="The step's array, when the step's spec carried `array`.")
    status: str
    reason: str | None = None


class PipelineOut(BaseModel):
    """Named steps submitted together, each waiting for the steps it needs to succeed."""

    id: int = Field(description="The pipeline's id: its first task's id.")
    owner: str
    name: str
    created_at: float
    status: str = Field(description="Where the pipeline stands as a whole (pending, running, succeeded, failed, "
                        "cancelled).")
    steps: list[PipelineStepOut]


class PipelineCancelOut(PipelineOut):
    cancelled: int = Field(0, description="Tasks this request moved to cancelled or cancelling.")


class PipelineListOut(BaseModel):
    pipelines: list[PipelineOut]
    next_before: int | None = Field(None, description="Pass as `before` to get the next page; null on the last.")


class ExtendIn(BaseModel):
    """More time for a running task: exactly one of the two, at least 60 s."""

    model_config = ConfigDict(extra="forbid")

    seconds: StrictInt | None = Field(None, ge=60, description="Seconds to add to the current run's limit.")
    by: str | None = Field(None, description='A duration to add: "1h", "30m", "1:30:00" (a bare number is '
                           "minutes, as sbatch --time).")


class AttemptOut(BaseModel):
    attempt: int = Field(description="0 is the first run (TACC_ATTEMPT).")
    started_at: float
    finished_at: float | None = Field(description="null for the current run.")
    outcome: str = Field(description="running, succeeded, failed, cancelled, lost, preempted, node_failure or "
                         "time_limit.")
    exit_code: int | None = None
    reason: str | None = None
    nodes: list[str] = Field(default_factory=list)


class AttemptsOut(BaseModel):
    task_id: int
    attempts: list[AttemptOut]


class TaskListOut(BaseModel):
    tasks: list[TaskOut]
    total: int = Field(description="Tasks matching the filter, over all pages.")
    next_before: int | None = Field(None, description="Pass as `before` to get the next page; null on the last.")


class DryRunOut(BaseModel):
    digest: str
    spec: dict[str, Any]
    plan: dict[str, Any]


class LogChunkOut(BaseModel):
    offset: int
    next_offset: int
    data: str
    eof: bool = Field(description="True when the task has ended and no more output will come.")
    status: str


class NodeOut(BaseModel):
    name: str
    gpus: int
    gpus_used: int
    gpus_free: int
    gpus_foreign: int = Field(0, description="GPUs held by jobs tacc did not submit (a shared Slurm partition): "
                              "never given to a tacc task.")
    partition: str | None = None
    gpu_type: str | None = None
    tasks: list[int]
    switch: str = Field("0", description="The leaf network switch the node hangs off.")
    schedulable: bool = Field(True, description="False: new tasks are not placed on the node (drained, down, "
                              "failed or gone, as the executor last reported); tasks running there keep it.")
    state: str | None = Field(None, description="The node's state as the executor reports it (Slurm: e.g. "
                              "\"idle+DRAIN\", \"down+NOT_RESPONDING\"); null: up.")


class ClusterOut(BaseModel):
    executor: str
    nodes: list[NodeOut]
    partitions: list[str] = []
    switches: dict[str, list[str]] = {}
    gpus: int
    gpus_used: int
    gpus_free: int
    pending: int
    running: int


class CodeOut(BaseModel):
    digest: str
    size: int = Field(description="Bytes uploaded (the compressed archive).")
    members: int = Field(0, description="Files, directories and links in the archive.")
    unpacked_bytes: int = Field(0, description="Bytes of the files once unpacked.")


class LimitsOut(BaseModel):
    max_gpus: int | None = Field(None, description="GPUs held at once; null: no cap.")
    guaranteed_gpus: int = Field(0, description="GPUs it can always get back by preempting borrowed work.")
    gpu_hours: float | None = Field(None, description="GPU-hour budget per accounting period; null: no budget.")


class QuotaOut(LimitsOut):
    kind: str = Field(description="user or group")
    name: str = Field(description='The user or group; "*" is the default for everyone not named.')
    updated_at: float


class QuotaListOut(BaseModel):
    quotas: list[QuotaOut]


class PairOut(BaseModel):
    user: float | None
    group: float | None


class MyLimitsOut(BaseModel):
    user: LimitsOut
    group: LimitsOut


class MyQuotaOut(BaseModel):
    user: str
    group: str
    period: str = Field(description="day, week or month (UTC calendar periods)")
    period_start: float
    period_end: float
    limits: MyLimitsOut = Field(description="The limits in force (defaults applied) for the user and its group.")
    used_gpu_hours: PairOut = Field(description="GPU-hours used this period by the user and by the whole group.")
    remaining_gpu_hours: PairOut = Field(description="Budget left this period (never below 0); null: no budget.")


class MembershipOut(BaseModel):
    user: str
    group: str


class GroupsOut(BaseModel):
    memberships: dict[str, str] = Field(description='user -> group; a user not listed is in group "default".')


class QuotaIn(BaseModel):
    """A quota as PUT by an admin: it replaces the row (a limit left out is no limit).

    ``guaranteed_gpus <= max_gpus`` (when a cap is set) is checked by the store.
    """

    model_config = ConfigDict(extra="forbid")

    max_gpus: StrictInt | None = Field(None, ge=0, le=1_000_000, description="GPUs held at once; null: no cap.")
    guaranteed_gpus: StrictInt = Field(0, ge=0, le=1_000_000, description="At most max_gpus when that is set.")
    gpu_hours: StrictFloat | None = Field(None, ge=0, le=1e12, allow_inf_nan=False,
                                    description="GPU-hour budget per accounting period; null: no budget.")


class GroupIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group: str = Field(description='The group to put the user in ("default": no group of its own).')
