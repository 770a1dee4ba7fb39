"""Response bodies of the REST API, as pydantic models (the OpenAPI document is generated from them)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorField(BaseModel):
    field: str
    message: str


class ErrorOut(BaseModel):
    status: int
    message: str
    errors: list[ErrorField] = Field(default_factory=list)


class QueueOut(BaseModel):
    """Where a waiting task stands (predictions, not promises)."""

    reason: str = Field(description="Resources, Quota, Priority or Topology.")
    position: int = Field(description="1 = the next task to start.")
    estimated_start: float | None = Field(None, description="Seconds since the epoch; null when unknown "
                                          "(e.g. a GPU-hour budget is used up).")
    detail: str = ""


class TaskOut(BaseModel):
    id: int
    owner: str
    name: str
    status: str
    digest: str
    reason: str | None = None
    exit_code: int | None = None
    submitted_at: float
    started_at: float | None = None
    finished_at: float | None = None
    placement: dict[str, Any] | None = None
    cancel_requested: bool = False
    queue: QueueOut | None = Field(None, description="Waiting tasks only: reason, position, estimated start.")
    spec: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None


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
    partition: str | None = None
    gpu_type: str | None = None
    tasks: list[int]


class ClusterOut(BaseModel):
    executor: str
    nodes: list[NodeOut]
    gpus: int
    gpus_used: int
    gpus_free: int
    pending: int
    running: int


class CodeOut(BaseModel):
    digest: str
    size: int
