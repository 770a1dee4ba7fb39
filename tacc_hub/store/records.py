"""What the store hands out (:class:`TaskRecord`) and takes in (:class:`NewTask`).

Invariants:

* Records are immutable snapshots of one row at one moment; the store never hands out a
  live object, so a record never changes under its reader. Their dicts are decoded JSON and
  belong to the reader; mutating them changes nothing in the database.
* ``TaskRecord.plan`` is ``None`` only where the store was asked not to read it (list
  results); everywhere else it is the plan as stored.
* :meth:`TaskRecord.to_json` returns only JSON types (str, int, float, bool, None, list,
  dict) and leaves the plan out unless asked.
* A :class:`NewTask` is checked when it is built (lengths, status), so a batch insert never
  fails half-way on a value the database would refuse.
* ``NewTask.gpus`` is the task's total GPUs, charged by quota accounting. Left at 0, it is
  taken from the spec (``resources.nodes x resources.gpus_per_node``, when both are whole
  numbers), so a caller that passes only the spec is still accounted right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .models import NAME_LEN
from .status import TaskStatus


@dataclass(frozen=True, slots=True)
class NewTask:
    """A task to insert: what the service knows at submit time."""

    owner: str
    name: str
    digest: str
    spec: dict[str, Any]
    plan: dict[str, Any]
    submitted_at: float
    status: TaskStatus = TaskStatus.PENDING
    reason: str | None = None
    gpus: int = 0  # total GPUs (nodes x gpus_per_node): what quota accounting charges per second of run
    array_index: int | None = None  # its index in its array (``GroupStore.insert_array`` sets the array id)

    def __post_init__(self) -> None:
        for field in ("owner", "name", "digest"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{field}: must be a non-empty string")
            if len(value) > NAME_LEN:
                raise ValueError(f"{field}: longer than {NAME_LEN} characters")
        if self.array_index is not None and (type(self.array_index) is not int or self.array_index < 0):
            raise ValueError("array_index: must be a whole number >= 0")
        if type(self.gpus) is not int or self.gpus < 0:
            raise ValueError("gpus: must be a whole number >= 0")
        if self.gpus == 0:
            res = self.spec.get("resources") if isinstance(self.spec, dict) else None
            if isinstance(res, dict):
                nodes, per_node = res.get("nodes", 1), res.get("gpus_per_node", 0)
                if type(nodes) is int and type(per_node) is int and nodes > 0 and per_node > 0:
                    object.__setattr__(self, "gpus", nodes * per_node)
        if not isinstance(self.status, TaskStatus):
            # Accept the plain value ("pending"), store the enum.
            object.__setattr__(self, "status", TaskStatus(self.status))


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One row of ``tasks``, decoded."""

    id: int
    owner: str
    name: str
    status: TaskStatus
    digest: str
    spec: dict[str, Any]
    plan: dict[str, Any] | None
    reason: str | None
    exit_code: int | None
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    updated_at: float
    placement: dict[str, Any] | None
    executor_state: dict[str, Any] | None
    cancel_requested: bool
    array_id: int | None = None  # the array it is an element of (issue 20)
    array_index: int | None = None
    pipeline_id: int | None = None  # the pipeline it is a step of

    def is_terminal(self) -> bool:
        return self.status.is_terminal()

    def to_json(self, include_plan: bool = False) -> dict[str, Any]:
        """A JSON-ready dict of every field; ``plan`` only when ``include_plan``."""
        out: dict[str, Any] = {
            "id": self.id,
            "owner": self.owner,
            "name": self.name,
            "status": self.status.value,
            "digest": self.digest,
            "spec": self.spec,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "submitted_at": self.submitted_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "updated_at": self.updated_at,
            "placement": self.placement,
            "executor_state": self.executor_state,
            "cancel_requested": self.cancel_requested,
            "array_id": self.array_id,
            "array_index": self.array_index,
            "pipeline_id": self.pipeline_id,
        }
        if include_plan:
            out["plan"] = self.plan
        return out
