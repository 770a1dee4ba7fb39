"""The controller: the one place where schema, compiler, scheduler, executor and store meet.

It owns the live view of the cluster (which task holds which GPU slots), the
pending queue, and the loop that reconciles executor observations and carries
out scheduling decisions.

Invariants:
- Every status change goes through ``Store.transition`` (guarded); the
  in-memory view follows the store, never leads it.
- At start, every non-terminal task in the store is recovered: pending tasks
  are re-queued, running ones are re-adopted with their placement and then
  observed; a task the executor cannot find is marked LOST with a reason,
  never dropped silently; "unknown" observations leave the task as it is.
- GPU slots are released only once a task is terminal or requeued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from tacc_hub.compiler import ExecutionPlan, SiteProfile, compile_task
from tacc_hub.executors import Executor, Launch, LaunchError, Observation
from tacc_hub.scheduler import ClusterState, FifoPolicy, Placement, Request, never_fits
from tacc_hub.schema import SnapshotCode, SpecError, TaskSpec
from tacc_hub.snapshot import CodeStore
from tacc_hub.store import InsertBatcher, NewTask, Store, TaskRecord, TaskStatus

log = logging.getLogger("tacc_hub.controller")

S = TaskStatus


class Conflict(Exception):
    """The request is valid but the task's state does not allow it (HTTP 409)."""


@dataclass
class Live:
    """What the controller keeps in memory about a non-terminal task."""

    owner: str
    status: TaskStatus
    time_limit: int
    placement: Placement | None = None
    state: dict[str, Any] = field(default_factory=dict)
    started_at: float | None = None
    cancel_requested: bool = False
    busy: bool = False  # a launch or cancel is in flight


def request_for(task_id: int, owner: str, spec_or_plan: TaskSpec | ExecutionPlan) -> Request:
    r = spec_or_plan.resources
    return Request(task_id=task_id, owner=owner, nodes=r.nodes, gpus_per_node=r.gpus_per_node,
                   partition=r.partition, gpu_type=r.gpu_type)


class Controller:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        site: SiteProfile,
        policy: FifoPolicy,
        code_store: CodeStore,
        *,
        poll_interval: float = 1.0,
        min_tick_interval: float = 0.01,
    ) -> None:
        self.store = store
        self.executor = executor
        self.site = site
        self.policy = policy
        self.code_store = code_store
        self.poll_interval = poll_interval
        self.min_tick_interval = min_tick_interval
        self.cluster = ClusterState(executor.nodes())
        self.pending: dict[int, Request] = {}
        self.live: dict[int, Live] = {}
        self.reasons: dict[int, str] = {}
        self.batcher = InsertBatcher(store)
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._bg: set[asyncio.Task[Any]] = set()
        executor.set_waker(self.wake)

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self.batcher.start()
        await self.recover()
        self._loop_task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        self._stopping = True
        self.wake()
        if self._loop_task:
            try:
                await asyncio.wait([self._loop_task], timeout=5.0)
            finally:
                if not self._loop_task.done():  # a tick stuck in the executor: do not wait for it
                    self._loop_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._loop_task
        for t in list(self._bg):
            t.cancel()
        await self.batcher.stop()
        await self.executor.close()

    def wake(self) -> None:
        self._wake.set()

    def _enqueue(self, req: Request) -> None:
        """Add to the pending queue, keeping it in id (submission) order without sorting per pass."""
        last = next(reversed(self.pending), None) if self.pending else None
        self.pending[req.task_id] = req
        if last is not None and req.task_id < last:
            self.pending = dict(sorted(self.pending.items()))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def recover(self) -> None:
        """Reconcile the store with the executor after a (re)start (see the module docstring)."""
        for rec in self.store.active():
            plan = rec.plan or {}
            limit = int(plan.get("resources", {}).get("time_limit", 3600))
            if rec.status == S.PENDING:
                self._enqueue(request_for(rec.id, rec.owner, ExecutionPlan.model_validate(plan)))
                continue
            if rec.status == S.STARTING and not rec.executor_state:
                self.store.transition(rec.id, S.PENDING, expected=S.STARTING, placement=None,
                                      reason="requeued: the service restarted before the task was launched")
                self._enqueue(request_for(rec.id, rec.owner, ExecutionPlan.model_validate(plan)))
                continue
            placement = Placement.model_validate(rec.placement) if rec.placement else None
            if placement is not None:
                self.cluster.adopt(rec.id, placement)
            status = S.RUNNING if rec.status == S.STARTING else rec.status
            if rec.status == S.STARTING:
                self.store.transition(rec.id, S.RUNNING, expected=S.STARTING, started_at=rec.started_at or time.time())
            self.live[rec.id] = Live(
                owner=rec.owner, status=status, time_limit=limit, placement=placement,
                state=dict(rec.executor_state or {}), started_at=rec.started_at, cancel_requested=rec.cancel_requested,
            )
            log.info("recovered task %s (%s)", rec.id, status)
        await self.observe()
        for task_id, live in list(self.live.items()):
            if live.status == S.RUNNING and live.cancel_requested:
                # cancelled while it was starting, and the service stopped before it could act
                if self.store.transition(task_id, S.CANCELLING, expected=S.RUNNING) is not None:
                    live.status = S.CANCELLING
            if live.status == S.CANCELLING:
                self._spawn(self._kill(task_id, S.CANCELLED, "cancelled"))

    # --- requests from the API ------------------------------------------------------

    def compile(self, spec: TaskSpec, *, dry_run: bool = False) -> ExecutionPlan:
        if isinstance(spec.code, SnapshotCode) and not dry_run and not self.code_store.has(spec.code.digest):
            raise SpecError.one("code.digest", "this code snapshot has not been uploaded (PUT /api/code/DIGEST)")
        plan = compile_task(spec, self.site)
        why = never_fits(request_for(0, "", spec), self.cluster)
        if why:
            raise SpecError.one("resources", f"this task can never run here: {why}")
        return plan

    async def submit(self, owner: str, spec: TaskSpec) -> TaskRecord:
        plan = self.compile(spec)
        rec = await self.batcher.submit(NewTask(
            owner=owner, name=spec.name, digest=plan.task_digest, spec=spec.model_dump(mode="json", by_alias=True),
            plan=plan.model_dump(mode="json"), submitted_at=time.time(),
        ))
        self._enqueue(request_for(rec.id, owner, plan))
        self.wake()
        return rec

    async def cancel(self, rec: TaskRecord) -> TaskRecord:
        if rec.status.is_terminal():
            raise Conflict(f"task {rec.id} has already ended ({rec.status})")
        if rec.status == S.PENDING:
            done = self.store.transition(rec.id, S.CANCELLED, expected=S.PENDING, finished_at=time.time(),
                                         reason="cancelled before it started")
            if done is not None:
                self.pending.pop(rec.id, None)
                self.reasons.pop(rec.id, None)
                return done
            rec = self.store.get(rec.id) or rec  # it moved on; cancel it where it is now
            if rec.status.is_terminal():
                return rec
        live = self.live.get(rec.id)
        if rec.status == S.STARTING or (live is not None and live.busy):
            self.store.update(rec.id, expected=(S.STARTING, S.RUNNING), cancel_requested=True)
            if live is not None:
                live.cancel_requested = True
            return self.store.get(rec.id) or rec
        if rec.status == S.RUNNING:
            moved = self.store.transition(rec.id, S.CANCELLING, expected=S.RUNNING, cancel_requested=True)
            if moved is not None and live is not None:
                live.status = S.CANCELLING
                self._spawn(self._kill(rec.id, S.CANCELLED, "cancelled"))
            return moved or self.store.get(rec.id) or rec
        return rec  # already CANCELLING

    # --- the loop ---------------------------------------------------------------------

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # arrives as the event is set, and the loop would then never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await self._wake.wait()
            if self._stopping:
                return
            self._wake.clear()
            began = loop.time()
            try:
                await self.tick()
            except Exception:
                log.exception("controller tick failed; retrying on the next one")
            # Wake-ups arriving meanwhile are served by one tick after the pause: under a burst of
            # submissions the loop makes at most 1/min_tick_interval passes a second.
            await asyncio.sleep(max(0.0, self.min_tick_interval - (loop.time() - began)))

    async def tick(self) -> None:
        await self.observe()
        self.enforce_time_limits()
        self.schedule()

    async def observe(self) -> None:
        states = {t: lv.state for t, lv in self.live.items() if not lv.busy and lv.status in (S.RUNNING, S.CANCELLING)}
        if not states:
            return
        seen = await self.executor.poll(states)
        for task_id, obs in seen.items():
            live = self.live.get(task_id)
            if live is None or live.busy:
                continue
            self._apply(task_id, live, obs)

    def _apply(self, task_id: int, live: Live, obs: Observation) -> None:
        now = time.time()
        if obs.status in ("running", "unknown"):
            return
        if live.status == S.CANCELLING:
            to, reason = S.CANCELLED, "cancelled"
        elif obs.status == "exited" and obs.exit_code == 0:
            to, reason = S.SUCCEEDED, None
        elif obs.status == "exited":
            to, reason = S.FAILED, obs.reason or f"exited with status {obs.exit_code}"
        else:
            to, reason = S.LOST, obs.reason or "the executor lost the task"
        self._finish(task_id, live, to, reason=reason, exit_code=obs.exit_code, now=now)

    def _finish(self, task_id: int, live: Live, to: TaskStatus, *, reason: str | None,
                exit_code: int | None = None, now: float | None = None) -> None:
        done = self.store.transition(task_id, to, expected=live.status, finished_at=now or time.time(),
                                     reason=reason, exit_code=exit_code)
        if done is None:
            rec = self.store.get(task_id)
            log.warning("task %s was no longer %s when finishing as %s (now %s)", task_id, live.status, to,
                        rec.status if rec else "missing")
            if rec is not None and not rec.status.is_terminal():
                live.status = rec.status
                return
        self.live.pop(task_id, None)
        self.cluster.release(task_id)
        self.wake()

    def enforce_time_limits(self) -> None:
        now = time.time()
        for task_id, live in list(self.live.items()):
            overdue = live.started_at is not None and now - live.started_at > live.time_limit
            if live.status == S.RUNNING and not live.busy and overdue:
                self._spawn(self._kill(task_id, S.FAILED, f"time limit of {live.time_limit} s reached"))

    async def _kill(self, task_id: int, to: TaskStatus, reason: str) -> None:
        live = self.live.get(task_id)
        if live is None or live.busy:
            return
        live.busy = True
        try:
            await self.executor.cancel(task_id, live.state)
        finally:
            live.busy = False
        if task_id in self.live:
            self._finish(task_id, live, to, reason=reason)

    def schedule(self) -> None:
        if not self.pending:
            return
        running: dict[str, int] = {}
        for lv in self.live.values():
            running[lv.owner] = running.get(lv.owner, 0) + 1
        decisions, waiting = self.policy.decide(
            iter(self.pending.values()), self.cluster, running
        )
        for w in waiting:
            self.reasons[w.task_id] = w.reason
        for d in decisions:
            req = self.pending.pop(d.task_id)
            self.reasons.pop(d.task_id, None)
            rec = self.store.transition(d.task_id, S.STARTING, expected=S.PENDING,
                                        placement=d.placement.model_dump(mode="json"), reason=None)
            if rec is None:  # cancelled meanwhile
                self.cluster.release(d.task_id)
                continue
            assert rec.plan is not None
            live = Live(owner=req.owner, status=S.STARTING, placement=d.placement, busy=True,
                        time_limit=int(rec.plan["resources"]["time_limit"]))
            self.live[d.task_id] = live
            self._spawn(self._launch(rec, live, d.placement))

    async def _launch(self, rec: TaskRecord, live: Live, placement: Placement) -> None:
        assert rec.plan is not None
        plan = ExecutionPlan.model_validate(rec.plan)
        try:
            state = await self.executor.launch(Launch(task_id=rec.id, owner=rec.owner, plan=plan, placement=placement))
        except LaunchError as exc:
            live.busy = False
            self._finish(rec.id, live, S.FAILED, reason=f"could not start: {exc}")
            return
        except Exception as exc:
            log.exception("launching task %s failed", rec.id)
            live.busy = False
            self._finish(rec.id, live, S.FAILED, reason=f"could not start: internal error {type(exc).__name__}")
            return
        now = time.time()
        live.state = state
        live.started_at = now
        moved = self.store.transition(rec.id, S.RUNNING, expected=S.STARTING, executor_state=state, started_at=now)
        live.busy = False
        if moved is None:
            # Should not happen (only we move STARTING tasks), but never leave processes behind.
            log.error("task %s left STARTING underneath the launch; stopping it", rec.id)
            await self.executor.cancel(rec.id, state)
            self.live.pop(rec.id, None)
            self.cluster.release(rec.id)
            return
        live.status = S.RUNNING
        if live.cancel_requested or moved.cancel_requested:
            if self.store.transition(rec.id, S.CANCELLING, expected=S.RUNNING) is not None:
                live.status = S.CANCELLING
                await self._kill(rec.id, S.CANCELLED, "cancelled")
        self.wake()

    # --- views ----------------------------------------------------------------------

    def reason_for(self, rec: TaskRecord) -> str | None:
        if rec.status == S.PENDING:
            return self.reasons.get(rec.id) or rec.reason or "queued"
        return rec.reason

    def status_of(self, task_id: int) -> TaskStatus | None:
        live = self.live.get(task_id)
        if live is not None:
            return live.status
        if task_id in self.pending:
            return S.PENDING
        return None
