"""Faults the controller recovers from: a failed node under a running task, an unreachable cluster.

A mixin of ``Controller`` (kept apart so that the controller's main path stays short); it uses
the controller's store, live view, queue and helpers.

Node failure: the executor reports a run as ended with a reason carrying ``REQUEUE_MARK`` (Slurm:
NODE_FAIL, BOOT_FAIL, its own preemption). The controller re-reads the nodes at once
(``nodes.refresh_once``, the same read as the periodic node refresh, shared with one in flight),
which makes the failed ones unschedulable (``Node.schedulable``) until the executor reports them
back: the periodic refresh (``node_refresh_interval``) sees them return; with that refresh off,
the nodes are re-read every ``down_recheck`` seconds while some are not schedulable. The failed
nodes of a run are those of its placement that are not schedulable. A task whose spec asks for it
(``qos.requeue``) goes back to PENDING (RUNNING -> PENDING, as after a preemption: its run is
charged, its ``checkpoint/`` and log kept, its place by submission time) at most
``max_requeues`` times; otherwise, or after that, it FAILS with the node named in its reason.
The count survives a service restart: it is kept in the task's ``executor_state`` under
``REQUEUES_KEY`` (the executors ignore that key).

Restarts (``qos.max_restarts``, ``qos.restart_on``): a run that fails by itself (a non-zero exit,
not cancelled, not its time limit; ``failure``), or ended by a node failure (``node_failure``) or a
preemption by the cluster (Slurm PREEMPTED; ``preemption``) that ``qos.requeue`` does not take,
goes back to PENDING as a requeue does, at most ``max_restarts`` times in all, but is held out of
the policy's queue until ``restart_backoff * 2**n`` seconds (at most ``MAX_BACKOFF``) after its
end (n: restarts before this one). The count (``RESTARTS_KEY``) and the not-before time
(``NOT_BEFORE_KEY``) are kept in ``executor_state``, so both survive a service restart. A task
our own scheduler preempts waits again as before and counts for nothing.

Unreachable cluster: while ``Executor.unavailable()`` gives a reason, nothing is launched (the
reason is every waiting task's queue explanation, ``Unavailable``) and ``Executor.probe()`` is
called; running tasks are observed as before ("unknown" leaves them running). A launch that fails
with ``LaunchUnavailable`` puts its task back to PENDING, never FAILED.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from tacc_hub.executors import REQUEUE_MARK, Executor, LaunchUnavailable, Observation
from tacc_hub.scheduler import ClusterState
from tacc_hub.scheduler.policy import Explanation, TaskView
from tacc_hub.scheduler.queue import LiveQueue
from tacc_hub.schema.task import RESTART_REASONS
from tacc_hub.store import Store, TaskRecord, TaskStatus

from . import nodes

if TYPE_CHECKING:
    from .controller import Controller, Live

log = logging.getLogger("tacc_hub.controller")

S = TaskStatus
# The service's own keys in a task's executor_state (the executors ignore them):
REQUEUES_KEY = "tacc_requeues"  # node-failure requeues so far (qos.requeue)
RESTARTS_KEY = "tacc_restarts"  # restarts so far (qos.max_restarts)
NOT_BEFORE_KEY = "tacc_not_before"  # a PENDING task in its restart backoff: epoch s it may start at
ATTEMPT_KEY = "tacc_attempt"  # the index of its current (running) or next (pending) run: TACC_ATTEMPT
EXTENDED_KEY = "tacc_extended"  # seconds the current run's limit was extended by
WARNED_KEY = "tacc_warned"  # the limit (s) at which the current run got its SIGUSR1 warning
SERVICE_KEYS = frozenset({REQUEUES_KEY, RESTARTS_KEY, NOT_BEFORE_KEY, ATTEMPT_KEY, EXTENDED_KEY, WARNED_KEY})
MAX_BACKOFF = 600.0
"""Longest wait before a restart (seconds)."""


def launched(executor_state: dict[str, Any] | None) -> bool:
    """Whether an executor ever answered a launch (its state holds more than the service's own keys)."""
    return any(k not in SERVICE_KEYS for k in executor_state or {})


def restart_policy(spec: dict[str, Any] | None) -> tuple[int, tuple[str, ...]]:
    """``(qos.max_restarts, qos.restart_on)`` of a stored spec (both left out of it at their defaults)."""
    qos = (spec or {}).get("qos") or {}
    n = qos.get("max_restarts", 0)
    on = qos.get("restart_on", RESTART_REASONS)
    return (n if type(n) is int and n > 0 else 0), tuple(str(x) for x in on) if isinstance(on, list | tuple) else ()


def _utc(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts))


class RecoveryMixin:
    # what the controller provides
    store: Store
    executor: Executor
    cluster: ClusterState
    queue: LiveQueue
    live: dict[int, Live]
    attempts: dict[int, int]
    _changed: bool
    _bg: set[asyncio.Task[Any]]
    _spawn: Callable[[Any], None]
    wake: Callable[[], None]
    _finish: Callable[..., None]
    _back_to_queue: Callable[..., bool]
    _group_ended: Callable[[int, TaskStatus], None]

    node_refresh_interval: float

    def _init_recovery(self, max_requeues: int, down_recheck: float, restart_backoff: float = 30.0) -> None:
        self.max_requeues = max_requeues
        self.restart_backoff = restart_backoff  # seconds before a first restart; doubles, at most MAX_BACKOFF
        self.restarts: dict[int, int] = {}  # task -> restarts so far (qos.max_restarts)
        self.held: dict[int, tuple[float, TaskView]] = {}  # task in its restart backoff -> (not before, its view)
        self.down_recheck = down_recheck  # without the periodic refresh: seconds between re-reads while some are down
        self.requeues: dict[int, int] = {}  # task -> node-failure requeues so far
        self.launch_hold: str | None = None  # why nothing can be launched now (the executor says)
        self.adopted: set[int] = set()  # tasks found starting, running or cancelling at start (metrics)
        self._probing = False
        self._reading: asyncio.Task[None] | None = None
        self._reading_began = float("-inf")  # monotonic: when the last read of the nodes began
        self._nodes_read_at = float("-inf")

    # --- node failure -------------------------------------------------------------------

    def _recover_requeues(self, rec: TaskRecord) -> None:
        for key, table in ((REQUEUES_KEY, self.requeues), (RESTARTS_KEY, self.restarts)):
            n = (rec.executor_state or {}).get(key)
            if type(n) is int and n > 0:
                table[rec.id] = n

    def _service_state(self, task_id: int, state: dict[str, Any]) -> dict[str, Any]:
        """``state`` with the task's requeue and restart counts; zero counts and attempt 0 left out."""
        out = {**state, REQUEUES_KEY: self.requeues.get(task_id, 0), RESTARTS_KEY: self.restarts.get(task_id, 0)}
        return {k: v for k, v in out.items() if k not in SERVICE_KEYS or v}

    def _node_failure(self, task_id: int, live: Live, obs: Observation) -> bool:
        """Take over an observation of a run ended by a node failure (True), else leave it to the caller."""
        if obs.status != "exited" or REQUEUE_MARK not in (obs.reason or "") or live.status != S.RUNNING:
            return False
        live.busy = True  # observe() leaves it alone until this is settled
        self._spawn(self._node_failed(task_id, live, obs, time.monotonic()))
        return True

    async def _node_failed(self, task_id: int, live: Live, obs: Observation, seen: float) -> None:
        now = time.time()
        what = (obs.reason or "").replace(REQUEUE_MARK, "").strip() or "node failure"
        try:
            await self.read_nodes(since=seen)  # not a periodic read begun before the failure was seen
        finally:
            live.busy = False
        if self.live.get(task_id) is not live:
            return
        failed = [s.node for s in live.placement.nodes if s.node in self.cluster.nodes
                  and not self.cluster.nodes[s.node].schedulable] if live.placement else []
        what += f" on {', '.join(failed)}" if failed else ""
        what += f" at {_utc(now)} UTC"
        n = self.requeues.get(task_id, 0)
        rec = self.store.get(task_id)
        asked = bool(((rec.spec if rec else None) or {}).get("qos", {}).get("requeue", False))
        preempted = "preempt" in what.lower()  # Slurm's own preemption (PREEMPTED), not a node failure
        kind, outcome = ("preemption", "preempted") if preempted else ("node_failure", "node_failure")
        if live.cancel_requested or not asked or n >= self.max_requeues:
            if not live.cancel_requested and self._restart(task_id, live, now, kind, what, outcome=outcome,
                                                           exit_code=obs.exit_code):
                return
            if live.cancel_requested:
                to, reason = S.CANCELLED, "cancelled"
                if self.store.transition(task_id, S.CANCELLING, expected=S.RUNNING) is not None:
                    live.status = S.CANCELLING
            elif not asked and self._no_restart_note(task_id, kind):
                to, reason = S.FAILED, f"{what}{self._no_restart_note(task_id, kind)}"
            elif not asked:
                to, reason = S.FAILED, f"{what}; not requeued: the task does not ask for it (qos.requeue)"
            else:
                to, reason = S.FAILED, f"{what}; not requeued again: requeued {n} times already (max_requeues)"
            log.warning("task %s: %s", task_id, reason)
            self._finish(task_id, live, to, reason=reason, exit_code=obs.exit_code, now=now,
                         outcome="cancelled" if to == S.CANCELLED else outcome)
            return
        reason = f"{what}; requeued ({n + 1} of at most {self.max_requeues}), waiting again in its place by age"
        self.requeues[task_id] = n + 1
        if self._back_to_queue(task_id, live, now, reason=reason, outcome=outcome, exit_code=obs.exit_code,
                               run_reason=what):
            log.warning("task %s: %s", task_id, reason)

    # --- restarts -----------------------------------------------------------------------

    @staticmethod
    def _failed_by_itself(live: Live, obs: Observation) -> bool:
        """A run that ended with a non-zero exit of its own: not cancelled, not a time limit, not a node failure."""
        why = (obs.reason or "").lower()
        return (live.status == S.RUNNING and not live.cancel_requested and obs.status == "exited"
                and obs.exit_code not in (None, 0) and REQUEUE_MARK not in why
                and not why.startswith(("time limit", "cancelled", "deadline")))

    def _restart(self, task_id: int, live: Live, now: float, kind: str, why: str, *, outcome: str,
                 exit_code: int | None = None) -> bool:
        """Start the task again after a backoff if its spec asks for ``kind`` and it has restarts left (True);
        False: the caller ends it."""
        if live.status != S.RUNNING or live.cancel_requested:
            return False
        rec = self.store.get(task_id)
        most, on = restart_policy(rec.spec if rec else None)
        n = self.restarts.get(task_id, 0)
        if kind not in on or n >= most:
            return False
        not_before = now + min(MAX_BACKOFF, self.restart_backoff * 2.0 ** n)
        reason = f"restarting (restart {n + 1} of {most}) at {_utc(not_before)} UTC after: {why}"
        self.restarts[task_id] = n + 1
        if not self._back_to_queue(task_id, live, now, reason=reason, outcome=outcome, exit_code=exit_code,
                                   run_reason=why, executor_state={NOT_BEFORE_KEY: not_before},
                                   hold_until=not_before):
            return True  # cancelled underneath: finished as such
        log.warning("task %s: %s", task_id, reason)
        return True

    def _no_restart_note(self, task_id: int, kind: str) -> str:
        """"; not restarted again: ..." for a task that asked for restarts on ``kind`` and has none left."""
        rec = self.store.get(task_id)
        most, on = restart_policy(rec.spec if rec else None)
        if most == 0 or kind not in on:
            return ""
        return f"; not restarted again: restarted {self.restarts.get(task_id, 0)} times already (max_restarts)"

    def _hold(self, task_id: int, not_before: float) -> None:
        """Keep a waiting task out of the policy's queue until ``not_before`` (its restart backoff)."""
        view = self.queue.waiting.pop(task_id, None)
        if view is not None:
            self.held[task_id] = (not_before, view)
            self._changed = True

    def _recover_hold(self, rec: TaskRecord) -> None:
        """A task recovered PENDING in its restart backoff is held again until its not-before time."""
        t = (rec.executor_state or {}).get(NOT_BEFORE_KEY)
        if isinstance(t, int | float) and not isinstance(t, bool) and t > time.time():
            self._hold(rec.id, float(t))

    def _release_held(self, now: float | None = None) -> None:
        """Tasks whose restart backoff is over enter the policy's queue (their place: their submission time)."""
        if not self.held:
            return
        now = time.time() if now is None else now
        for task_id, (not_before, view) in list(self.held.items()):
            if not_before <= now:
                del self.held[task_id]
                self.queue.add(view)  # its partition and GPU type are still in queue.constraints
                self._changed = True

    async def read_nodes(self, since: float | None = None) -> None:
        """Re-read the executor's nodes and apply them (``nodes.refresh_once``: in a worker thread, since the
        executor runs commands; a node that left the list is not schedulable). Callers meanwhile (the
        periodic refresh, several tasks of one failed node) wait for the same read; ``since`` (monotonic):
        a read begun before then does not do, another one follows it."""
        while True:
            if self._reading is None or self._reading.done():
                self._reading_began = time.monotonic()
                self._reading = asyncio.get_running_loop().create_task(self._read_nodes_once())
                self._bg.add(self._reading)  # cancelled with the controller's other background work
                self._reading.add_done_callback(self._bg.discard)
            began = self._reading_began
            await asyncio.shield(self._reading)
            if since is None or began >= since:
                return

    async def _read_nodes_once(self) -> None:
        try:
            await nodes.refresh_once(cast("Controller", self))
        finally:
            self._nodes_read_at = time.monotonic()

    def _recheck_down_nodes(self) -> None:
        """Only with the periodic node refresh off: re-read the nodes while some are not schedulable."""
        if self.node_refresh_interval > 0 or self.cluster.schedulable() is None:
            return
        reading = self._reading is not None and not self._reading.done()
        if not reading and time.monotonic() - self._nodes_read_at >= self.down_recheck:
            self._spawn(self.read_nodes())

    # --- unreachable cluster ----------------------------------------------------------

    def _cluster_unavailable(self) -> bool:
        """True (and probe) while the executor cannot launch; the reason is kept for the queue's explanations."""
        why = self.executor.unavailable()
        if why != self.launch_hold:
            if why is None:
                log.info("launches resumed (the executor answers again, or its next try is due)")
            elif self.launch_hold is None:
                log.warning("launches held: %s", why)
            self.launch_hold = why
            self._changed = True
        if why is not None and not self._probing:
            self._spawn(self._probe())
        return why is not None

    async def _probe(self) -> None:
        self._probing = True
        try:
            await self.executor.probe()
        finally:
            self._probing = False
        if self.executor.unavailable() is None:
            self.wake()

    def _launch_unavailable(self, rec: TaskRecord, live: Live, exc: LaunchUnavailable) -> None:
        """The launch could not reach the cluster: the task waits again (nothing ran)."""
        live.busy = False
        if live.cancel_requested:
            done = self.store.transition(rec.id, S.CANCELLED, expected=S.STARTING, finished_at=time.time(),
                                         reason="cancelled before it started")
            if done is not None:
                self.live.pop(rec.id, None)
                self.queue.drop(rec.id)
                self._changed = True
                self._group_ended(rec.id, S.CANCELLED)  # groups: its array slot, what waits on it
                return
        moved = self.store.transition(rec.id, S.PENDING, expected=S.STARTING, placement=None,
                                      reason=f"waiting: {exc}")
        if moved is None:
            log.error("task %s left STARTING underneath a failed launch", rec.id)
            return
        log.warning("task %s waits again: %s", rec.id, exc)
        self.live.pop(rec.id, None)
        self.attempts[rec.id] = live.attempt  # nothing ran
        self.queue.requeue(rec.id, time.time())
        self._changed = True
        self.wake()

    def _unavailable_info(self, info: Explanation | None) -> Explanation | None:
        if self.launch_hold is None:
            return info
        return Explanation("Unavailable", info.position if info else 1, None, self.launch_hold)
