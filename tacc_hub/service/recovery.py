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
from tacc_hub.scheduler.policy import Explanation
from tacc_hub.scheduler.queue import LiveQueue
from tacc_hub.store import Store, TaskRecord, TaskStatus

from . import nodes

if TYPE_CHECKING:
    from .controller import Controller, Live

log = logging.getLogger("tacc_hub.controller")

S = TaskStatus
REQUEUES_KEY = "tacc_requeues"  # in executor_state: node-failure requeues so far


def launched(executor_state: dict[str, Any] | None) -> bool:
    """Whether an executor ever answered a launch (its state holds more than our requeue count)."""
    return any(k != REQUEUES_KEY for k in executor_state or {})


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

    node_refresh_interval: float

    def _init_recovery(self, max_requeues: int, down_recheck: float) -> None:
        self.max_requeues = max_requeues
        self.down_recheck = down_recheck  # without the periodic refresh: seconds between re-reads while some are down
        self.requeues: dict[int, int] = {}  # task -> node-failure requeues so far
        self.launch_hold: str | None = None  # why nothing can be launched now (the executor says)
        self._probing = False
        self._reading: asyncio.Task[None] | None = None
        self._reading_began = float("-inf")  # monotonic: when the last read of the nodes began
        self._nodes_read_at = float("-inf")

    # --- node failure -------------------------------------------------------------------

    def _recover_requeues(self, rec: TaskRecord) -> None:
        n = (rec.executor_state or {}).get(REQUEUES_KEY)
        if isinstance(n, int) and n > 0:
            self.requeues[rec.id] = n

    def _with_requeues(self, task_id: int, state: dict[str, Any]) -> dict[str, Any]:
        n = self.requeues.get(task_id, 0)
        return {**state, REQUEUES_KEY: n} if n else state

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
        if live.cancel_requested or not asked or n >= self.max_requeues:
            if live.cancel_requested:
                to, reason = S.CANCELLED, "cancelled"
                if self.store.transition(task_id, S.CANCELLING, expected=S.RUNNING) is not None:
                    live.status = S.CANCELLING
            elif not asked:
                to, reason = S.FAILED, f"{what}; not requeued: the task does not ask for it (qos.requeue)"
            else:
                to, reason = S.FAILED, f"{what}; not requeued again: requeued {n} times already (max_requeues)"
            log.warning("task %s: %s", task_id, reason)
            self._finish(task_id, live, to, reason=reason, exit_code=obs.exit_code, now=now)
            return
        reason = f"{what}; requeued ({n + 1} of at most {self.max_requeues}), waiting again in its place by age"
        if self._back_to_queue(task_id, live, now, reason=reason, executor_state={REQUEUES_KEY: n + 1}):
            log.warning("task %s: %s", task_id, reason)
            self.requeues[task_id] = n + 1

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
