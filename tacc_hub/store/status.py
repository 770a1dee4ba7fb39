"""The task state machine: one status enum and the legal moves listed beside it.

Invariants:

* A task is always in exactly one :class:`TaskStatus`; the store writes no other value.
* A task's status changes only along an edge of :data:`TRANSITIONS`. The store refuses any
  other move with :class:`IllegalTransition` *before* it touches the database, and applies a
  legal move only if the row is still in the status the caller expected (a guarded update).
* ``SUCCEEDED``, ``FAILED``, ``CANCELLED`` and ``LOST`` are terminal: no edge leaves them.
  Everything else is :data:`ACTIVE`, and the service reconciles every active task with its
  executor when it starts and on every poll.
* ``STARTING -> PENDING`` is a requeue and is legal only because nothing ran yet (the
  executor refused the submission or the placement went away before launch).
* ``RUNNING -> PENDING`` is a preemption: the scheduler stopped a preemptible task (after its
  checkpoint grace period) and it waits again, keeping its submission time; or a requeue after a
  node under the task failed (``qos.requeue``, see ``service/recovery.py``).
* ``LOST`` means the executor no longer knows the task *and* said so definitively; an
  executor that cannot be reached leaves the task where it is ("unknown" is never "gone").
"""

from __future__ import annotations

import enum


class TaskStatus(enum.StrEnum):
    """Where a task is in its life; the value is what the database and the API carry."""

    PENDING = "pending"  # accepted, waiting for the scheduler
    STARTING = "starting"  # placed, being handed to the executor
    RUNNING = "running"  # the executor reports it running
    CANCELLING = "cancelling"  # a cancel was sent to the executor, not yet confirmed
    SUCCEEDED = "succeeded"  # exited 0
    FAILED = "failed"  # exited non-zero, or could not be started
    CANCELLED = "cancelled"  # cancelled by its owner or an admin
    LOST = "lost"  # the executor definitively lost track of it

    def is_terminal(self) -> bool:
        """True when no transition leaves this status."""
        return self in TERMINAL

    def can_move_to(self, to: TaskStatus) -> bool:
        """True when ``self -> to`` is a legal transition."""
        return to in TRANSITIONS[self]


_S = TaskStatus

TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    _S.PENDING: frozenset({_S.STARTING, _S.CANCELLED}),
    _S.STARTING: frozenset({_S.RUNNING, _S.PENDING, _S.FAILED, _S.CANCELLING, _S.CANCELLED, _S.LOST}),
    _S.RUNNING: frozenset({_S.SUCCEEDED, _S.FAILED, _S.CANCELLING, _S.LOST, _S.PENDING}),
    _S.CANCELLING: frozenset({_S.CANCELLED, _S.LOST}),
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
    _S.CANCELLED: frozenset(),
    _S.LOST: frozenset(),
}
"""Legal moves: ``TRANSITIONS[a]`` is every status a task in ``a`` may move to."""

TERMINAL: frozenset[TaskStatus] = frozenset(s for s, outs in TRANSITIONS.items() if not outs)
"""Statuses no transition leaves."""

ACTIVE: frozenset[TaskStatus] = frozenset(TaskStatus) - TERMINAL
"""Statuses that still need the scheduler's or an executor's attention."""


def can_move(from_status: TaskStatus | str, to_status: TaskStatus | str) -> bool:
    """True when ``from_status -> to_status`` is a legal transition (strings are status values)."""
    return TaskStatus(to_status) in TRANSITIONS[TaskStatus(from_status)]


class IllegalTransition(ValueError):
    """A move that :data:`TRANSITIONS` does not list; carries the task and both statuses."""

    def __init__(self, task_id: int | None, from_status: TaskStatus, to_status: TaskStatus) -> None:
        self.task_id = task_id
        self.from_status = from_status
        self.to_status = to_status
        who = f"task {task_id}" if task_id is not None else "task"
        super().__init__(f"{who}: illegal status transition {from_status.value} -> {to_status.value}")


def check_move(task_id: int | None, from_status: TaskStatus, to_status: TaskStatus) -> None:
    """Raise :class:`IllegalTransition` unless ``from_status -> to_status`` is legal."""
    if not can_move(from_status, to_status):
        raise IllegalTransition(task_id, TaskStatus(from_status), TaskStatus(to_status))


# Catch an edit that forgets a status: every status has a row, and every target is a status.
assert set(TRANSITIONS) == set(TaskStatus)
