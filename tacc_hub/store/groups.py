"""What the store keeps about many tasks at once (issue 20): arrays, pipelines, dependencies.

:class:`GroupStore` is a mixin of :class:`~tacc_hub.store.store.Store` (it uses the store's engine
and clock).

Invariants:

* An array, its elements (``tasks`` rows with ``array_id``/``array_index``) and their dependency rows
  are inserted in one transaction: an array is never half there. So is a pipeline with all its steps.
* ``task_arrays.id`` is its first element's task id and ``pipelines.id`` its first task's id: one id
  space with tasks, as Slurm's array job id (``tcloud cancel 12`` names the array whose first element is 12).
* ``task_dependencies`` rows are only added; a dependency names a task or array that existed, of the
  same owner, when the waiting task was inserted, so no cycle can be written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ArrayRecord:
    id: int  # = the first element's task id
    owner: str
    name: str
    size: int
    max_running: int | None
    pipeline_id: int | None
    step: str | None
    created_at: float


@dataclass(frozen=True, slots=True)
class PipelineRecord:
    id: int
    owner: str
    name: str
    steps: list[dict[str, Any]]  # [{"name", "needs": [..], "task_id": N} or {..., "array_id": N}], in order
    created_at: float


@dataclass(frozen=True, slots=True)
class DependencyRecord:
    task_id: int  # the waiting task
    kind: str  # "task" | "array"
    on_id: int
    when: str


class GroupStore:
    """Arrays, pipelines and dependencies (see the module docstring); implemented in issue 20."""
