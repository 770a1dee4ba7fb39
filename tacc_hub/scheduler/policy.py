"""The policy contract: ``Policy.schedule(view) -> list[Action]``, shared by the service and the simulator.

A policy reads a ``View`` (plain data: the time, the waiting and running tasks,
the nodes with their free GPU slots and switches) and answers with actions,
applied in order by its caller: ``Preempt`` (stop a running task and put it back
in the queue, keeping its submit time) and ``Start`` (run a waiting task on an
exact placement). ``Wake`` asks to be called again at a given time even if
nothing else happens (a LAS policy demotes running tasks as they attain
service); a later pass's ``Wake`` replaces it (the caller keeps one pending
wake-up), and the caller also calls ``schedule`` after every arrival and completion.

Invariants (the caller checks them and refuses a list of actions that breaks one):
- No GPU is allocated twice: a ``Start`` uses only slots free in the view or
  freed by an earlier ``Preempt`` of the same list, none of them twice.
- Gang, all-or-nothing: a ``Start`` places the whole task (a rigid task on
  exactly ``nodes`` distinct nodes with ``gpus_per_node`` GPUs each; a flexible
  one on ``gpus`` GPUs in any split), or the task is not started.
- A non-preemptible task is never preempted; only running tasks are preempted,
  only waiting tasks are started, each at most once per list.
- Quotas (``View.quotas``, when given): no start takes a user or group above
  its ``max_gpus``; no task of an ``exhausted`` user or group starts.
  Preemption to reclaim a guarantee takes only preemptible tasks of groups
  holding more than their own guarantee.
- Topology: a task with ``spread_ok`` False is placed within one switch.
- Pure: ``schedule`` does no I/O and reads no clock (``view.now`` is the time);
  it never mutates the view. A policy may keep state between calls (e.g.
  decayed fair-share usage) learned only from the views it was given.
- Durations are predictions (``TaskView.predicted``). The truth
  (``TaskView.duration``) is None for every policy except one whose ``oracle``
  flag is set (a reference, not a competitor). ``View.history`` (optional)
  holds the run times of tasks that have already *ended*, never of a live one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from .cluster import Placement
from .frozen import Frozen
from .history import DurationHistory
from .topology import NodeView

# A task's placement shape, (nodes, gpus_per_node, flexible, spread_ok). Typed as a tuple of any length on
# purpose: compiled (``native``), a fixed-length tuple type is kept as a C struct and a new tuple object is
# built each time one is used as a dict or set key; this way the one tuple made per view is used as is.
Shape = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TaskView(Frozen):
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
    time_limit: float | None = None  # the user's wall-clock limit, if any (an upper bound on the run)
    priority: int = 0  # order among the owner's own tasks (higher first), from the spec's qos.priority
    spread_ok: bool = True  # may run across switches (over TCP): False when the task needs RDMA or one switch
    gpus: int = field(init=False)  # nodes x gpus_per_node
    # (nodes, gpus_per_node, flexible, spread_ok): what placement depends on, made once (a policy's cache key)
    shape: Shape = field(init=False, repr=False, compare=False)

    def __init__(self, id: int, owner: str, group: str, submit: float, nodes: int, gpus_per_node: int,
                 predicted: float, duration: float | None = None, qos: str = "normal", preemptible: bool = True,
                 flexible: bool = False, attained: float = 0.0, done: float = 0.0, queued: float = 0.0,
                 start: float | None = None, placement: Placement | None = None, rate: float = 1.0,
                 time_limit: float | None = None, priority: int = 0, spread_ok: bool = True) -> None:
        # written out (not the dataclass's own): compiled (``native``), an explicit ``__init__`` is native,
        # 15x faster to call; the same fields, order and defaults (tests/unit/test_frozen_init.py)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "submit", submit)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "gpus_per_node", gpus_per_node)
        object.__setattr__(self, "predicted", predicted)
        object.__setattr__(self, "duration", duration)
        object.__setattr__(self, "qos", qos)
        object.__setattr__(self, "preemptible", preemptible)
        object.__setattr__(self, "flexible", flexible)
        object.__setattr__(self, "attained", attained)
        object.__setattr__(self, "done", done)
        object.__setattr__(self, "queued", queued)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "rate", rate)
        object.__setattr__(self, "time_limit", time_limit)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "spread_ok", spread_ok)
        object.__setattr__(self, "gpus", nodes * gpus_per_node)
        object.__setattr__(self, "shape", (nodes, gpus_per_node, flexible, spread_ok))

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
class Limits(Frozen):
    """One user's or one group's quota. None: no limit."""

    max_gpus: int | None = None  # GPUs held at once, over all its running tasks
    guaranteed_gpus: int = 0  # GPUs it can always get back, by preempting others' borrowed preemptible work
    gpu_hours: float | None = None  # budget per accounting period


@dataclass(frozen=True, slots=True)
class Quotas(Frozen):
    """The quotas in force. ``users``/``groups`` by name; ``default_*`` for everyone not named.

    ``exhausted`` names the users (``"user:NAME"``) and groups (``"group:NAME"``)
    with no GPU-hours left in the current period (the caller does the accounting):
    their tasks wait (reason ``Quota``).
    """

    users: Mapping[str, Limits] = field(default_factory=dict)
    groups: Mapping[str, Limits] = field(default_factory=dict)
    default_user: Limits = Limits()
    default_group: Limits = Limits()
    exhausted: frozenset[str] = frozenset()
    period: str = "month"  # the accounting period of the gpu_hours budgets (for messages: "per month")

    def user(self, name: str) -> Limits:
        return self.users.get(name, self.default_user)

    def group(self, name: str) -> Limits:
        return self.groups.get(name, self.default_group)


@dataclass(frozen=True, slots=True)
class Changes(Frozen):
    """What changed between the caller's previous view and this one (optional, so a policy can sync in
    O(changes) instead of comparing every task): ``waiting`` and ``running`` name every task that entered
    or left that mapping, or whose view there was replaced, since the view numbered ``since``; this view
    is numbered ``serial``. A policy that did not see view ``since`` last ignores it (and compares all)."""

    serial: int
    since: int
    waiting: AbstractSet[int]
    running: AbstractSet[int]

    def __init__(self, serial: int, since: int, waiting: AbstractSet[int], running: AbstractSet[int]) -> None:
        # written out (not the dataclass's own): compiled (``native``), an explicit ``__init__`` is native,
        # 15x faster to call; the same fields, order and defaults (tests/unit/test_frozen_init.py)
        object.__setattr__(self, "serial", serial)
        object.__setattr__(self, "since", since)
        object.__setattr__(self, "waiting", waiting)
        object.__setattr__(self, "running", running)


@dataclass(frozen=True, slots=True)
class View(Frozen):
    """What a policy sees. ``waiting`` and ``running`` are keyed by task id; ``waiting`` in queue order."""

    now: float
    waiting: Mapping[int, TaskView]
    running: Mapping[int, TaskView]
    nodes: Sequence[NodeView]
    quotas: Quotas | None = None  # None: no quotas (a quota-unaware policy may be given only None)
    history: DurationHistory | None = None  # run times of ended tasks (read-only for policies); None: unknown
    changes: Changes | None = None  # what changed since the caller's previous view; None: not told

    def __init__(self, now: float, waiting: Mapping[int, TaskView], running: Mapping[int, TaskView],
                 nodes: Sequence[NodeView], quotas: Quotas | None = None, history: DurationHistory | None = None,
                 changes: Changes | None = None) -> None:
        # written out (not the dataclass's own): compiled (``native``), an explicit ``__init__`` is native,
        # 15x faster to call; the same fields, order and defaults (tests/unit/test_frozen_init.py)
        object.__setattr__(self, "now", now)
        object.__setattr__(self, "waiting", waiting)
        object.__setattr__(self, "running", running)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "quotas", quotas)
        object.__setattr__(self, "history", history)
        object.__setattr__(self, "changes", changes)


@dataclass(frozen=True, slots=True)
class Start(Frozen):
    task_id: int
    placement: Placement
    note: str = ""  # the decision, for people: e.g. "across 2 switches over TCP: waiting would cost more"

    def __init__(self, task_id: int, placement: Placement, note: str = "") -> None:
        # written out (not the dataclass's own): compiled (``native``), an explicit ``__init__`` is native,
        # 15x faster to call; the same fields, order and defaults (tests/unit/test_frozen_init.py)
        object.__setattr__(self, "task_id", task_id)
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "note", note)


@dataclass(frozen=True, slots=True)
class Preempt(Frozen):
    task_id: int

    def __init__(self, task_id: int) -> None:
        # written out (not the dataclass's own): compiled (``native``), an explicit ``__init__`` is native,
        # 15x faster to call; the same fields, order and defaults (tests/unit/test_frozen_init.py)
        object.__setattr__(self, "task_id", task_id)


@dataclass(frozen=True, slots=True)
class Wake(Frozen):
    at: float

    def __init__(self, at: float) -> None:
        # written out (not the dataclass's own): compiled (``native``), an explicit ``__init__`` is native,
        # 15x faster to call; the same fields, order and defaults (tests/unit/test_frozen_init.py)
        object.__setattr__(self, "at", at)


Action = Start | Preempt | Wake

REASONS = ("Resources", "Quota", "Priority", "Topology", "OverQuota")
"""Why a task waits: not enough free GPUs; a quota (cap or budget) of its user or group;
tasks ahead of it (or a reservation for one); GPUs are free but not in the shape it needs;
it can never start under the quotas in force (more GPUs than a cap, or more GPU-hours than a
whole budget: a quota lowered after it was submitted; it waits, with no estimate, for a raise)."""


@dataclass(frozen=True, slots=True)
class Explanation(Frozen):
    """Why a waiting task waits, where it stands, and when it should start (predictions, not promises)."""

    reason: str  # one of REASONS
    position: int  # 1 = next to start
    estimated_start: float | None  # in view time; None when it cannot be estimated (e.g. quota exhausted)
    detail: str = ""  # for people: "needs 8 GPUs on one switch; 3 free", "group lab-a at its cap of 16 GPUs"


class Policy(Protocol):
    name: ClassVar[str]
    preemptive: ClassVar[bool]  # may return Preempt: then it is called even when no GPU is free
    oracle: ClassVar[bool]  # sees true durations
    # quota_aware (optional ClassVar, default False): honours View.quotas; only such a policy may be given quotas

    def schedule(self, view: View) -> list[Action]: ...


class Explains(Protocol):
    """A policy that can explain its queue (the live service's policy must)."""

    def explain(self, view: View) -> dict[int, Explanation]:
        """An explanation for every waiting task of ``view``; pure, like ``schedule``."""
        ...
