"""The policy contract: ``Policy.schedule(view) -> list[Action]``, shared by the service and the simulator.

A policy reads a ``View`` (plain data: the time, the waiting and running tasks,
the nodes with their free GPU slots and switches) and answers with actions,
applied in order by its caller: ``Preempt`` (stop a running task and put it back
in the queue, keeping its submit time) and ``Start`` (run a waiting task on an
exact placement). ``Wake`` asks to be called again at a given time even if
nothing else happens (a LAS policy demotes running tasks as they attain
service); the caller also calls ``schedule`` after every arrival and completion.

Invariants (the caller checks them and refuses a list of actions that breaks one):
- No GPU is allocated twice: a ``Start`` uses only slots free in the view or
  freed by an earlier ``Preempt`` of the same list, none of them twice.
- Gang, all-or-nothing: a ``Start`` places the whole task (a rigid task on
  exactly ``nodes`` distinct nodes with ``gpus_per_node`` GPUs each; a flexible
  one on ``gpus`` GPUs in any split), or the task is not started.
- A non-preemptible task is never preempted; only running tasks are preempted,
  only waiting tasks are started, each at most once per list.
- Pure: ``schedule`` does no I/O and reads no clock (``view.now`` is the time);
  it never mutates the view. A policy may keep state between calls (e.g.
  decayed fair-share usage) learned only from the views it was given.
- Durations are predictions (``TaskView.predicted``). The truth
  (``TaskView.duration``) is None for every policy except one whose ``oracle``
  flag is set (a reference, not a competitor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from .cluster import Placement
from .topology import NodeView


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task as a policy sees it. Times in seconds, service in GPU-seconds."""

    id: int
    owner: str  # the user
    group: str  # the tenant (a Philly virtual cluster, a lab): the unit of fair share and quotas
    submit: float
    nodes: int
    gpus_per_node: int
    predicted: float  # predicted run time on a packed placement, from history; never the truth
    duration: float | None = None  # the true run time: set for oracle policies only
    qos: str = "normal"
    preemptible: bool = True
    flexible: bool = False  # GPUs may be split over nodes in any way (trace jobs); else rigid shape
    attained: float = 0.0  # GPU-seconds of service received before the current run (LAS)
    done: float = 0.0  # seconds of packed-equivalent work done before the current run
    queued: float = 0.0  # when it (re-)entered the waiting queue
    start: float | None = None  # running only: when the current run began
    placement: Placement | None = None  # running only
    rate: float = 1.0  # running only: work per second on this placement (1 / slowdown)
    gpus: int = field(init=False)  # nodes x gpus_per_node

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", self.nodes * self.gpus_per_node)

    def attained_at(self, now: float) -> float:
        """GPU-seconds of service by ``now`` (the current run included)."""
        if self.start is None:
            return self.attained
        return self.attained + self.gpus * max(0.0, now - self.start)

    def done_at(self, now: float) -> float:
        """Seconds of packed-equivalent work done by ``now``."""
        if self.start is None:
            return self.done
        return self.done + self.rate * max(0.0, now - self.start)


@dataclass(frozen=True, slots=True)
class View:
    """What a policy sees. ``waiting`` and ``running`` are keyed by task id; ``waiting`` in queue order."""

    now: float
    waiting: Mapping[int, TaskView]
    running: Mapping[int, TaskView]
    nodes: Sequence[NodeView]


@dataclass(frozen=True, slots=True)
class Start:
    task_id: int
    placement: Placement


@dataclass(frozen=True, slots=True)
class Preempt:
    task_id: int


@dataclass(frozen=True, slots=True)
class Wake:
    at: float


Action = Start | Preempt | Wake


class Policy(Protocol):
    name: ClassVar[str]
    preemptive: ClassVar[bool]  # may return Preempt: then it is called even when no GPU is free
    oracle: ClassVar[bool]  # sees true durations

    def schedule(self, view: View) -> list[Action]: ...
