"""The executor contract: launch, poll (in batches), cancel, and where logs live.

An executor runs plans; it never decides. The service hands it an exact
placement and reads back observations. It keeps what it needs to find a task
again after a service restart in a small JSON ``state`` dict that the service
stores with the task (as JupyterHub spawners do with get_state/load_state).

Invariants:
- ``poll`` answers for every task it is asked about; ``unknown`` means "could
  not tell now" and must never be read as "gone".
- ``cancel`` is idempotent and returns once the task's processes are gone.
- An executor that cannot reach its cluster says so (``unavailable``); the service then keeps
  new tasks waiting instead of failing their launches (``LaunchUnavailable``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tacc_hub.compiler.plan import ExecutionPlan
from tacc_hub.scheduler.cluster import Node, Placement

from .identity import Account, Identity

# Ends an ``Observation.reason`` after which the service may run the task again: it did not
# fail by itself (a node of it failed, or the cluster preempted it). See ``TaskSpec.qos.requeue``.
REQUEUE_MARK = "[requeue]"


class LaunchError(RuntimeError):
    """The task could not be started; ``reason`` is shown to its owner."""


class ExecUnsupported(LaunchError):
    """This executor cannot do that to a running task (reach its ports, run a command in it, signal it)."""


class LaunchUnavailable(LaunchError):
    """The executor could not reach its cluster to start the task: it should wait and be tried again."""


@dataclass(frozen=True, slots=True)
class Launch:
    task_id: int
    owner: str
    plan: ExecutionPlan
    placement: Placement
    attempt: int = 0  # runs before this one (preempted, restarted); the task sees it as TACC_ATTEMPT
    deadline: float | None = None  # epoch seconds its time limit ends at, as of launch (TACC_DEADLINE)
    account: Account | None = None  # the Unix account it runs as; None: the service's own (task_identity=service)
    group: str = ""  # the owner's tacc group (Slurm: --account/--qos through the site's maps)
    array_id: int | None = None  # the array it is an element of (issue 20): the task sees it as TACC_ARRAY_ID


@dataclass(frozen=True, slots=True)
class Observation:
    status: Literal["running", "exited", "gone", "unknown"]
    exit_code: int | None = None
    reason: str | None = None


CommandObserver = Callable[[str, float, bool], None]
"""Told of each command an executor ran: (its name, e.g. "sbatch"; seconds; whether it succeeded)."""


def _unobserved(command: str, seconds: float, ok: bool) -> None:
    """The default ``command_observer``: nobody is told."""


def command_name(argv: list[str]) -> str:
    """The command an argv runs, without a ``runuser -u U --`` or ``sudo -n -u U --`` prefix: "sbatch"."""
    head = argv[:7]
    if "--" in head:
        argv = argv[head.index("--") + 1:]
    return argv[0].rsplit("/", 1)[-1] if argv else "?"


class Executor(abc.ABC):
    name: str = "abstract"
    identity: Identity = Identity()  # who tasks run as; the service sets it (TaccHub.task_identity)
    command_observer: CommandObserver = staticmethod(_unobserved)  # the service's metrics set it

    def set_waker(self, wake: Callable[[], None]) -> None:
        """Called with the service's wake-up function; call it when a task changes state."""
        self._wake = wake

    def wake(self) -> None:
        fn = getattr(self, "_wake", None)
        if fn is not None:
            fn()

    @abc.abstractmethod
    def nodes(self) -> list[Node]:
        """The nodes and GPU slots this executor can place tasks on."""

    def refresh_nodes(self) -> list[Node]:
        """Read the nodes again (blocking; the service calls it in a worker thread). Default: they never change."""
        return self.nodes()

    def node_states(self) -> dict[str, str]:
        """Nodes left out of ``nodes()`` because they cannot take work now -> why (e.g. Slurm's "idle+DRAIN")."""
        return {}

    @abc.abstractmethod
    async def launch(self, launch: Launch) -> dict[str, Any]:
        """Prepare and start the task; return its state dict. Raise LaunchError with a user-facing reason."""

    @abc.abstractmethod
    async def poll(self, states: dict[int, dict[str, Any]]) -> dict[int, Observation]:
        """Observe many tasks at once."""

    @abc.abstractmethod
    async def cancel(self, task_id: int, state: dict[str, Any]) -> None:
        """Stop the task (SIGTERM, then SIGKILL after the grace period)."""

    @abc.abstractmethod
    def task_dir(self, task_id: int) -> Path:
        """Directory holding the task's log (``output.log``) and working copy (``work/``)."""

    def log_path(self, task_id: int) -> Path:
        return self.task_dir(task_id) / "output.log"

    def work_dir(self, task_id: int) -> Path:
        return self.task_dir(task_id) / "work"

    # --- reaching a running task (issue 19) ------------------------------------------------

    def task_host(self, task_id: int, state: dict[str, Any], placement: Placement | None) -> str:
        """The address the service reaches the task's ports at: its first node (local: the loopback)."""
        raise ExecUnsupported(f"the {self.name} executor cannot reach a task's ports")

    async def port_owned(self, task_id: int, state: dict[str, Any], placement: Placement | None, port: int) -> bool:
        """Whether a process of this task (not of anyone else) listens on ``port`` on ``task_host``."""
        raise ExecUnsupported(f"the {self.name} executor cannot reach a task's ports")

    async def listening_ports(self, task_id: int, state: dict[str, Any], placement: Placement | None) -> list[int]:
        """The TCP ports the task's processes listen on now (empty where the executor cannot tell)."""
        return []

    def exec_argv(self, task_id: int, state: dict[str, Any], placement: Placement | None, argv: list[str], *,
                  tty: bool) -> list[str]:
        """The command the service runs to start ``argv`` inside the running task (its user, node, working
        directory, environment and GPUs); with ``tty`` its stdin/stdout/stderr are a terminal."""
        raise ExecUnsupported(f"the {self.name} executor cannot run commands in a task")

    async def signal(self, task_id: int, state: dict[str, Any], signame: str) -> None:
        """Send ``signame`` (USR1) to the task's main process(es), as Slurm's ``--signal`` does."""
        raise ExecUnsupported(f"the {self.name} executor cannot signal a task")

    async def set_time_limit(self, task_id: int, state: dict[str, Any], seconds: int) -> None:  # noqa: B027
        """The task's time limit is now ``seconds`` from its start (an extension). Default: nothing to tell
        the cluster (the service enforces the limit itself)."""

    async def gpu_usage(self, task_id: int, state: dict[str, Any], placement: Placement | None,
                        command: tuple[str, ...]) -> list[tuple[float, float | None]]:
        """(utilization %, memory MiB or None) of each of the task's GPUs now, read with ``command``
        (``TaccHub.gpu_query_command``); empty where it cannot be read."""
        return []

    def unavailable(self) -> str | None:
        """Why no task can be launched now (the cluster has been unreachable too long), or None."""
        return None

    async def probe(self) -> None:  # noqa: B027 - optional hook: an executor that is always reachable
        """Try to reach the cluster again; called while ``unavailable`` gives a reason."""

    async def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release resources held by the executor (tasks keep running)."""
