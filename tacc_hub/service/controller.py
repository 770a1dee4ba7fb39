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
- Scheduling decisions come from a ``Policy`` through ``LiveQueue`` (the same
  policy code as the simulator's); the queue explanations (reason, position,
  estimated start) are recomputed at most every ``explain_interval`` seconds,
  and only when something changed.
- A preempted task (``Preempt``) gets SIGTERM and the executor's grace period to
  checkpoint, then goes back to PENDING with its submission time (its place by
  age); it is never marked failed for having been stopped.
- Faults (``recovery``): a run ended by a node failure is requeued when its spec asks
  for it (``qos.requeue``, at most ``max_requeues`` times) and the failed nodes are
  taken out of scheduling; while the executor cannot reach its cluster nothing is
  launched and waiting tasks say why; a launch that could not reach it waits again.
- Retries (``recovery``): a run that ends for a reason in ``qos.restart_on`` goes back to PENDING
  (at most ``qos.max_restarts`` times), held out of the policy's queue for a backoff of
  ``restart_backoff * 2**n`` seconds (at most ``MAX_BACKOFF``); the hold and the counts live in
  ``executor_state`` (``recovery.SERVICE_KEYS``), so they survive a restart of the service.
- Every ended run is recorded (``Store.add_attempt``); ``Launch.attempt`` (TACC_ATTEMPT) counts the
  earlier runs.
- Arrays, pipelines, dependencies (``groups``): a waiting task whose dependency is unmet, or whose array
  has ``max_running`` elements admitted, is gated (out of the policy's queue) until then; every end
  (``_finish``, a cancel) goes through ``_group_ended``, which frees the array's slot and re-checks what
  waited on it (released, or cancelled when it can never be met); the gates are rebuilt at ``recover``.
- Time: a run's limit is its plan's plus its own extensions (``extend``; a new run starts from the
  plan's again); the task is launched with its deadline (TACC_DEADLINE) and gets SIGUSR1 once per
  limit at ``deadline - qos.warn_before`` (only when that is after its start; an extension re-arms
  it; warning and extensions are kept in ``executor_state``: a restart does not warn twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.pool import StaticPool

from tacc_hub.compiler import ExecutionPlan, SiteProfile, compile_task
from tacc_hub.executors import REQUEUE_MARK, Executor, Launch, LaunchError, LaunchUnavailable, Observation
from tacc_hub.executors.identity import IdentityError
from tacc_hub.scheduler import ClusterState, Placement, Request, never_fits
from tacc_hub.scheduler.durations import RunTimePredictor
from tacc_hub.scheduler.explain import OVER_QUOTA
from tacc_hub.scheduler.policy import Explanation, Limits, Policy, Quotas, TaskView
from tacc_hub.scheduler.queue import LiveQueue
from tacc_hub.scheduler.quota import exhausted, period_start, refusal, usage_by_group
from tacc_hub.schema import SnapshotCode, SpecError, TaskSpec
from tacc_hub.schema.task import DEFAULT_WARN_BEFORE
from tacc_hub.snapshot import CodeStore
from tacc_hub.store import InsertBatcher, NewTask, Store, TaskRecord, TaskStatus

from . import nodes, requestid
from .events import Events, TaskEvent
from .gcpause import GcPacer
from .groups import GroupsMixin
from .recovery import ATTEMPT_KEY, EXTENDED_KEY, WARNED_KEY, RecoveryMixin, launched, restart_policy
from .running_settings import RunningSettings

log = logging.getLogger("tacc_hub.controller")

S = TaskStatus

WARN_EXIT = 128 + int(signal.SIGUSR1)
"""The exit status of a process killed by SIGUSR1 (a task that did not handle its time-limit warning)."""

PASS_SHARE = 3.0
"""After a tick of T seconds the next waits at least PASS_SHARE * T (passes: at most a quarter of the loop)."""


def _ignore(seconds: float) -> None:
    """The default ``pass_observer``: nobody is told."""


class Conflict(Exception):
    """The request is valid but the task's state does not allow it (HTTP 409)."""


class LimitRefused(Exception):
    """A request over a site limit or a budget (HTTP 422); ``field`` names the request field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class ExecutorFailed(Exception):
    """The executor could not carry out a change to a running task (HTTP 502); nothing was recorded."""


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
    busy: bool = False  # a launch, cancel or preemption is in flight
    attempt: int = 0  # earlier runs (preempted, requeued, restarted): TACC_ATTEMPT
    extended: int = 0  # seconds this run's limit was extended by (extend)
    warn_before: int = DEFAULT_WARN_BEFORE  # qos.warn_before: SIGUSR1 this long before the limit
    label: str = ""  # for people, in other tasks' queue details: "task 12", "Jupyter server jupyter-bob (task 11)"


    @property
    def limit(self) -> int:
        """The run's effective time limit: the plan's plus this run's extensions (seconds)."""
        return self.time_limit + self.extended


SERVER_WRAPPER = "tacc_server.py"  # the entrypoint TaccSpawner gives a server task (spawner.payload.WRAPPER_NAME)


def label_of(rec: TaskRecord) -> str:
    """How a running task is named in the queue details of its owner's waiting tasks."""
    argv = (((rec.spec or {}).get("entrypoint") or {}).get("argv")) or []
    if argv and str(argv[-1]) == SERVER_WRAPPER:
        return f"Jupyter server {rec.name} (task {rec.id})"
    return f"task {rec.id}"


def task_view(task_id: int, owner: str, group: str, submitted_at: float, spec: dict[str, Any],
              predicted: float) -> TaskView:
    """The scheduler's view of a task, from its stored spec (a ``TaskSpec`` dump, defaults filled in)."""
    r, qos, net = spec.get("resources", {}), spec.get("qos", {}), spec.get("network", {})
    return TaskView(
        id=task_id, owner=owner, group=group, submit=submitted_at, nodes=int(r.get("nodes", 1)),
        gpus_per_node=int(r.get("gpus_per_node", 0)), predicted=predicted, qos=str(qos.get("class", "normal")),
        preemptible=bool(qos.get("preemptible", False)), priority=int(qos.get("priority", 0)),
        time_limit=float(r.get("time_limit", 3600)), queued=submitted_at,
        spread_ok=net.get("rdma", "preferred") != "required" and not net.get("same_switch", False),
    )


def warn_before_of(spec: dict[str, Any] | None) -> int:
    """The spec's ``qos.warn_before`` (seconds; left out of a stored spec at its default)."""
    v = ((spec or {}).get("qos") or {}).get("warn_before", DEFAULT_WARN_BEFORE)
    return v if type(v) is int and v > 0 else DEFAULT_WARN_BEFORE


def _state_int(state: dict[str, Any] | None, key: str) -> int:
    v = (state or {}).get(key)
    return v if type(v) is int and v > 0 else 0


def request_for(task_id: int, owner: str, spec_or_plan: TaskSpec | ExecutionPlan) -> Request:
    r = spec_or_plan.resources
    return Request(task_id=task_id, owner=owner, nodes=r.nodes, gpus_per_node=r.gpus_per_node,
                   partition=r.partition, gpu_type=r.gpu_type)


def _own_connections(store: Store) -> bool:
    """Whether a second thread gets its own connections (not one shared in-memory SQLite connection)."""
    engine = getattr(store, "engine", None)
    return engine is not None and not isinstance(engine.pool, StaticPool)


class Controller(RecoveryMixin, GroupsMixin):
    running: RunningSettings = RunningSettings()  # site settings of ports, exec, time; the app sets them
    def __init__(
        self,
        store: Store,
        executor: Executor,
        site: SiteProfile,
        policy: Policy,
        code_store: CodeStore,
        *,
        poll_interval: float = 1.0,
        min_tick_interval: float = 0.01,
        max_running_per_user: int | None = None,
        explain_interval: float = 0.5,
        quota_period: str = "month",
        quota_refresh: float = 30.0,
        max_requeues: int = 3,
        down_recheck: float = 10.0,
        node_refresh_interval: float = 30.0,
        gc_freeze_interval: float = 600.0,
        restart_backoff: float = 30.0,
    ) -> None:
        self.store = store
        self.executor = executor
        self.site = site
        self.policy = policy
        self.code_store = code_store
        self.poll_interval = poll_interval
        self.min_tick_interval = min_tick_interval
        self.cluster = ClusterState(executor.nodes())
        # Seconds between reads of the nodes (service.nodes); 0: only at start and after a node failure
        # (then every down_recheck seconds while some are not schedulable, see recovery).
        self.node_refresh_interval = node_refresh_interval
        self.queue = LiveQueue(self.cluster, policy, max_running_per_user)
        self.history = RunTimePredictor()
        self.groups: dict[str, str] = {}  # user -> group; not listed: "default"
        self.quotas: Quotas | None = None  # None: no quota configured at all
        self.quota_period = quota_period
        self.quota_refresh = quota_refresh  # seconds between re-counts of GPU-hours used this period
        self.usage: dict[str, float] = {}  # GPU-seconds per user this period, as of the last re-count
        self._quotas_at = float("-inf")
        self._quotas_stale = True
        self.live: dict[int, Live] = {}
        self.attempts: dict[int, int] = {}  # runs so far of tasks preempted and waiting again
        self.explain_interval = explain_interval
        self._explained: dict[int, Explanation] = {}
        self._explained_at = float("-inf")
        self._over_quota: set[int] = set()  # waiting tasks last explained as OverQuota (logged once)
        self._changed = True  # the queue changed since the last explanation
        self._wake_handle: asyncio.TimerHandle | None = None
        # Batches written in a thread of their own (see store.batcher), except on a shared in-memory database.
        self.batcher = InsertBatcher(store, threaded=_own_connections(store))
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._bg: set[asyncio.Task[Any]] = set()
        self.gc = GcPacer(gc_freeze_interval)
        executor.set_waker(self.wake)
        self.events = Events()  # task lifecycle events for metrics and notifications (events.py)
        self.pass_observer: Callable[[float], None] = _ignore  # told each pass's duration, seconds (metrics.py)
        self._extending = asyncio.Lock()  # one extension at a time: each checks the limits against the last
        self._init_recovery(max_requeues, down_recheck, restart_backoff)
        self._init_groups(threaded=_own_connections(store))

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self.batcher.start()
        self.reload_quotas()
        await self.recover()
        self.gc.maybe()  # the recovered queue and rows leave the collector's generations
        self._loop_task = asyncio.get_running_loop().create_task(self._loop())
        if self.node_refresh_interval > 0 and nodes.refreshes(self.executor):
            self._spawn(nodes.refresh_loop(self, self.node_refresh_interval))

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

    def nodes_changed(self) -> None:
        """The node list changed (see ``service.nodes``): explain and schedule again."""
        self._changed = True
        self.wake()

    def group_of(self, user: str) -> str:
        return self.groups.get(user, "default")

    def quotas_changed(self) -> None:
        """Quotas or memberships changed (admin API): reload them now, so the next submit sees them."""
        self.reload_quotas()
        self.wake()

    def _has_budgets(self) -> bool:
        q = self.quotas
        return q is not None and (q.default_user.gpu_hours is not None or q.default_group.gpu_hours is not None
                                  or any(x.gpu_hours is not None for x in (*q.users.values(), *q.groups.values())))

    def reload_quotas(self, now: float | None = None) -> None:
        """Quotas, memberships and this period's usage from the store; who is out of GPU-hours."""
        now = time.time() if now is None else now
        q = self.store.load_quotas()
        groups = self.store.memberships()
        self.usage = self.store.gpu_seconds_by_owner(period_start(now, self.quota_period), now)
        ex = exhausted(q, self.usage, groups)
        none = Limits()
        if not (q.users or q.groups or ex) and q.default_user == none and q.default_group == none:
            self.quotas = None  # nothing configured: no quota work on the scheduling path
        else:
            self.quotas = Quotas(q.users, q.groups, q.default_user, q.default_group, ex, self.quota_period)
        if groups != self.groups:
            self.groups = groups
            for table in (self.queue.waiting, self.queue.running):
                for tid, t in table.items():
                    g = self.group_of(t.owner)
                    if g != t.group:
                        table[tid] = replace(t, group=g)
        self._quotas_at = now
        self._quotas_stale = False
        self._changed = True

    def _view(self, task_id: int, owner: str, name: str, digest: str, submitted_at: float,
              spec: dict[str, Any]) -> TaskView:
        limit = float(spec.get("resources", {}).get("time_limit", 3600))
        predicted = self.history.predict(owner, name, digest, limit)
        return task_view(task_id, owner, self.group_of(owner), submitted_at, spec, predicted)

    def _enqueue(self, view: TaskView, spec: dict[str, Any]) -> None:
        r = spec.get("resources", {})
        self.queue.add(view, r.get("partition"), r.get("gpu_type"))
        self._changed = True

    def _learn_history(self, pages: int = 4) -> None:
        """Seed the duration predictions with the latest successful runs in the store."""
        before: int | None = None
        runs: list[TaskRecord] = []
        for _ in range(pages):
            recs, _ = self.store.list_tasks(None, [S.SUCCEEDED], 500, before)
            runs.extend(recs)
            if len(recs) < 500:
                break
            before = recs[-1].id
        for rec in reversed(runs):  # oldest first: the newest runs are the ones kept
            self._observe_run(rec)

    def _observe_run(self, rec: TaskRecord) -> None:
        """A successful run teaches the predictions and the policy's run-time distribution."""
        if rec.started_at is None or rec.finished_at is None:
            return
        seconds = rec.finished_at - rec.started_at
        self.history.observe(rec.owner, rec.name, rec.digest, seconds)
        self.queue.history.observe(self.group_of(rec.owner), seconds)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    def _learn_usage(self, now: float | None = None, window: float = 86400.0, windows: int = 28) -> None:
        """Seed fair share with the GPU-seconds used in the last ``windows`` days (ended runs, preempted runs,
        running ones up to now), per (group, user) and day: a restart does not reset anybody's share."""
        now = time.time() if now is None else now
        past = []
        for k in range(windows):
            hi = now - k * window
            used = self.store.gpu_seconds_by_owner(hi - window, hi)
            if used:
                past.append((hi - window / 2, {(self.group_of(o), o): s for o, s in used.items()}))
        self.queue.history.seed_usage(past)

    async def recover(self) -> None:
        """Reconcile the store with the executor after a (re)start (see the module docstring)."""
        self._learn_history()
        self._learn_usage()
        active = self.store.active()
        for rec in active:
            self._recover_requeues(rec)
            plan = rec.plan or {}
            limit = int(plan.get("resources", {}).get("time_limit", 3600))
            view = self._view(rec.id, rec.owner, rec.name, rec.digest, rec.submitted_at, rec.spec or {})
            attempt = _state_int(rec.executor_state, ATTEMPT_KEY)
            if rec.status == S.PENDING:
                self._enqueue(view, rec.spec or {})
                self._recover_hold(rec)
                if attempt:
                    self.attempts[rec.id] = attempt
                continue
            if rec.status == S.STARTING and not launched(rec.executor_state):
                self.store.transition(rec.id, S.PENDING, expected=S.STARTING, placement=None,
                                      reason="requeued: the service restarted before the task was launched")
                self._enqueue(view, rec.spec or {})
                if attempt:
                    self.attempts[rec.id] = attempt
                continue
            placement = Placement.model_validate(rec.placement) if rec.placement else None
            if placement is not None:
                self.queue.adopt(view, placement, rec.started_at or time.time())
            status = S.RUNNING if rec.status == S.STARTING else rec.status
            if rec.status == S.STARTING:
                self.store.transition(rec.id, S.RUNNING, expected=S.STARTING, started_at=rec.started_at or time.time())
            self.live[rec.id] = Live(
                owner=rec.owner, status=status, time_limit=limit, placement=placement, label=label_of(rec),
                state=dict(rec.executor_state or {}), started_at=rec.started_at, cancel_requested=rec.cancel_requested,
                attempt=attempt, extended=_state_int(rec.executor_state, EXTENDED_KEY),
                warn_before=warn_before_of(rec.spec),
            )
            log.info("recovered task %s (%s)", rec.id, status)
        self._recover_groups(active)  # dependencies and array slots gate waiting tasks again
        self.adopted = set(self.live)  # re-adopted at this start (metrics: how many, which are found lost)
        await self.observe()
        for task_id, live in list(self.live.items()):
            if live.status == S.RUNNING and live.cancel_requested:
                # cancelled while it was starting, and the service stopped before it could act
                if self.store.transition(task_id, S.CANCELLING, expected=S.RUNNING) is not None:
                    live.status = S.CANCELLING
            if live.status == S.CANCELLING:
                self._spawn(self._kill(task_id, S.CANCELLED, "cancelled"))

    # --- requests from the API ------------------------------------------------------

    def compile(self, spec: TaskSpec, *, dry_run: bool = False, owner: str | None = None) -> ExecutionPlan:
        """The plan of ``spec``, or SpecError: invalid, can never fit the cluster, or (with ``owner``) a quota."""
        if not dry_run:
            self._check_snapshot(spec)
        plan = compile_task(spec, self._site_for(owner))
        self._check_fit(spec, owner)
        return plan

    def _check_snapshot(self, spec: TaskSpec) -> None:
        if isinstance(spec.code, SnapshotCode) and not self.code_store.has(spec.code.digest):
            raise SpecError.one("code.digest", "this code snapshot has not been uploaded (PUT /api/code/DIGEST)")

    def _check_fit(self, spec: TaskSpec, owner: str | None) -> None:
        """SpecError when ``spec``'s resources can never fit the cluster or (with ``owner``) the owner's quotas."""
        why = never_fits(request_for(0, "", spec), self.cluster)
        if why:
            raise SpecError.one("resources", f"this task can never run here: {why}")
        if owner is not None and self.quotas is not None:
            r = spec.resources
            over = refusal(self.quotas, owner, self.group_of(owner), r.total_gpus, float(r.time_limit),
                           period=self.quota_period)
            if over:
                raise SpecError.one("resources", f"over quota: {over}")

    def _site_for(self, owner: str | None) -> SiteProfile:
        """The site as ``owner``'s tasks see it: with owner identity, envs are cached per account
        (``<env_root>/<account>/<digest>``, built by and owned by that account: no one runs an env
        another user could have written)."""
        if owner is None or self.executor.identity.mode != "owner":
            return self.site
        try:
            account = self.executor.identity.account(owner)
        except IdentityError:
            return self.site  # refused at submit; a dry run still shows the plan
        if account is None:
            return self.site
        return self.site.model_copy(update={"env_root": f"{self.site.env_root.rstrip('/')}/{account.name}"})

    async def submit(self, owner: str, spec: TaskSpec) -> TaskRecord:
        if spec.array is not None:
            raise SpecError.one("array", "a spec with an array is submitted with submit_array")
        plan = self.compile(spec, owner=owner)
        if spec.depends_on or spec.inputs:
            return await self._submit_linked(owner, spec, plan)  # groups: checked, then gated while unmet
        dumped = spec.model_dump(mode="json", by_alias=True)
        rec = await self.batcher.submit(NewTask(
            owner=owner, name=spec.name, digest=plan.task_digest, spec=dumped,
            plan=plan.model_dump(mode="json"), submitted_at=time.time(),
        ))
        self._enqueue(self._view(rec.id, owner, spec.name, plan.task_digest, rec.submitted_at, dumped), dumped)
        self.events.emit(TaskEvent("submitted", rec.id, owner, rec.submitted_at))
        self.wake()
        return rec

    async def cancel(self, rec: TaskRecord) -> TaskRecord:
        if rec.status.is_terminal():
            raise Conflict(f"task {rec.id} has already ended ({rec.status})")
        if rec.status == S.PENDING:
            done = self.store.transition(rec.id, S.CANCELLED, expected=S.PENDING, finished_at=time.time(),
                                         reason="cancelled before it started")
            if done is not None:
                self.queue.drop(rec.id)
                self.held.pop(rec.id, None)
                self.attempts.pop(rec.id, None)
                self._changed = True
                self._group_ended(rec.id, S.CANCELLED)
                self.events.emit(TaskEvent("cancelled", rec.id, rec.owner, time.time(), reason=done.reason))
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
            self.pass_observer(loop.time() - began)  # the pass duration histogram (metrics.py)
            self.gc.maybe()  # full collections here, between passes, not inside one (see gcpause)
            # Wake-ups arriving meanwhile are served by one tick after the pause: under a burst of
            # submissions the loop makes at most 1/min_tick_interval passes a second, and a pass that
            # took long (a pass walks the whole queue: ~3 ms at 10,000 waiting tasks) is followed by
            # PASS_SHARE times as long for requests, so passes take at most 1/(1+PASS_SHARE) of the loop.
            took = loop.time() - began
            await asyncio.sleep(max(0.0, max(self.min_tick_interval, (1 + PASS_SHARE) * took) - took))

    async def tick(self) -> None:
        await self.observe()
        self.enforce_time_limits()
        self.warn_deadlines()
        self._release_held()
        since = time.time() - self._quotas_at
        if (self._quotas_stale and since >= 1.0) or since >= self.quota_refresh:  # at most once a second
            self.reload_quotas()
        self._recheck_down_nodes()
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
        if obs.status in ("running", "unknown") or self._node_failure(task_id, live, obs):
            return
        reason: str | None
        if live.status == S.CANCELLING:
            to, reason = S.CANCELLED, "cancelled"
        elif obs.status == "exited" and obs.exit_code == 0:
            to, reason = S.SUCCEEDED, obs.reason  # e.g. leftover processes the local executor killed
        elif obs.status == "exited" and obs.exit_code == WARN_EXIT and WARNED_KEY in live.state:
            # It did not handle its time-limit warning: that ends its run as its limit would (no restart).
            self._finish(task_id, live, S.FAILED, exit_code=obs.exit_code, now=now, outcome="time_limit", reason=(
                f"ended by SIGUSR1, its warning {live.warn_before} s before its time limit of {live.limit} s "
                "(qos.warn_before): trap SIGUSR1 to checkpoint, or give a shorter qos.warn_before"))
            return
        elif obs.status == "exited":
            to, reason = S.FAILED, (obs.reason or "").replace(REQUEUE_MARK, "").strip() or \
                f"exited with status {obs.exit_code}"
            if self._failed_by_itself(live, obs):
                if self._restart(task_id, live, now, "failure", reason, outcome="failed", exit_code=obs.exit_code):
                    return
                reason = f"{reason}{self._no_restart_note(task_id, 'failure')}"
        else:
            to, reason = S.LOST, obs.reason or "the executor lost the task"
        self._finish(task_id, live, to, reason=reason, exit_code=obs.exit_code, now=now)

    def _finish(self, task_id: int, live: Live, to: TaskStatus, *, reason: str | None,
                exit_code: int | None = None, now: float | None = None, outcome: str | None = None) -> None:
        """End the task as ``to``; its run (if it ran) is recorded with ``outcome`` (default: from ``to``)."""
        now = now or time.time()
        done = self.store.transition(task_id, to, expected=live.status, finished_at=now,
                                     reason=reason, exit_code=exit_code)
        if done is not None:
            self._record_attempt(task_id, live, now, outcome or str(to), exit_code=exit_code, reason=reason)
            kind = "timeout" if outcome == "time_limit" else str(to)
            self.events.emit(TaskEvent(kind, task_id, live.owner, now, reason=reason,  # type: ignore[arg-type]
                                       exit_code=exit_code, gpus=live.placement.gpu_count if live.placement else 0))
        if done is None:
            rec = self.store.get(task_id)
            log.warning("task %s was no longer %s when finishing as %s (now %s)", task_id, live.status, to,
                        rec.status if rec else "missing")
            if rec is not None and not rec.status.is_terminal():
                live.status = rec.status
                return
        self.live.pop(task_id, None)
        self.attempts.pop(task_id, None)
        self.requeues.pop(task_id, None)
        self.restarts.pop(task_id, None)
        self.held.pop(task_id, None)
        self.queue.drop(task_id)
        self._changed = True
        self._group_ended(task_id, to)  # its array's next element, what waits on it
        if self.quotas is not None and self._has_budgets():
            self._quotas_stale = True  # its GPU-hours count now: re-count before the next pass
        if to == S.SUCCEEDED and done is not None and done.started_at is not None and done.finished_at is not None:
            self._observe_run(done)
        self.wake()

    def _record_attempt(self, task_id: int, live: Live, now: float, outcome: str, *,
                        exit_code: int | None = None, reason: str | None = None) -> None:
        """Record the run that just ended (nothing when it never started); a failure to write is logged."""
        if live.started_at is None:
            return
        nodes_of = [s.node for s in live.placement.nodes] if live.placement else []
        try:
            self.store.add_attempt(task_id, live.attempt, live.started_at, now, outcome, exit_code=exit_code,
                                   reason=reason, nodes=nodes_of)
        except Exception:
            log.exception("recording run %s of task %s failed", live.attempt, task_id)

    def enforce_time_limits(self) -> None:
        now = time.time()
        for task_id, live in list(self.live.items()):
            overdue = live.started_at is not None and now - live.started_at > live.limit
            if live.status == S.RUNNING and not live.busy and overdue:
                self._spawn(self._kill(task_id, S.FAILED, f"time limit of {live.limit} s reached",
                                       outcome="time_limit"))

    def warn_deadlines(self, now: float | None = None) -> None:
        """SIGUSR1 to each running task whose warning time (``deadline - qos.warn_before``) has come, once per
        limit: the limit warned at is kept in its ``executor_state`` (a restart of the service does not warn
        again; an extension, a new limit, does). No warning when that time is not after the run's start."""
        now = time.time() if now is None else now
        for task_id, live in list(self.live.items()):
            if live.status != S.RUNNING or live.busy or live.started_at is None:
                continue
            limit = live.limit
            if live.state.get(WARNED_KEY) == limit or limit <= live.warn_before:
                continue
            if now < live.started_at + limit - live.warn_before:
                continue
            live.state = {**live.state, WARNED_KEY: limit}
            self.store.update(task_id, expected=(S.RUNNING,), executor_state=live.state)
            self._spawn(self._warn(task_id, live.state, limit))
            self.events.emit(TaskEvent("near_limit", task_id, live.owner, now, reason=(
                f"{max(0, int(live.started_at + limit - now))} s left of its time limit of {limit} s")))

    async def _warn(self, task_id: int, state: dict[str, Any], limit: int) -> None:
        try:
            await self.executor.signal(task_id, state, "USR1")
            log.info("task %s: SIGUSR1 sent, its time limit of %s s ends soon", task_id, limit)
        except Exception as exc:  # never fatal: the limit is enforced anyway
            log.warning("task %s: the time-limit warning (SIGUSR1) could not be sent: %s", task_id, exc)

    async def _kill(self, task_id: int, to: TaskStatus, reason: str, *, outcome: str | None = None) -> None:
        live = self.live.get(task_id)
        if live is None or live.busy:
            return
        live.busy = True
        try:
            await self.executor.cancel(task_id, live.state)
        finally:
            live.busy = False
        if task_id in self.live:
            self._finish(task_id, live, to, reason=reason, outcome=outcome)

    def schedule(self) -> None:
        if not self.queue.waiting or self._cluster_unavailable():
            return
        now = time.time()
        plan = self.queue.plan(now, self.quotas)
        self._changed = True
        if plan.wake_at is not None:
            self._wake_later(plan.wake_at - now)
        for p in plan.preempts:
            self._spawn(self._preempt(p.task_id))
        for st in plan.starts:
            tid = st.task_id
            placement = st.placement
            rec = self.store.transition(tid, S.STARTING, expected=S.PENDING,
                                        placement=placement.model_dump(mode="json"), reason=st.note or None)
            if rec is None:  # cancelled meanwhile
                self.queue.unstart(tid)
                continue
            assert rec.plan is not None
            live = Live(owner=rec.owner, status=S.STARTING, placement=placement, busy=True, label=label_of(rec),
                        time_limit=int(rec.plan["resources"]["time_limit"]), attempt=self.attempts.pop(tid, 0),
                        warn_before=warn_before_of(rec.spec))
            self.live[tid] = live
            self._spawn(self._launch(rec, live, placement))

    def _wake_later(self, delay: float) -> None:
        if self._wake_handle is not None:
            self._wake_handle.cancel()
        self._wake_handle = asyncio.get_running_loop().call_later(max(0.0, delay), self.wake)

    async def _preempt(self, task_id: int) -> None:
        """Stop a preemptible task (grace period to checkpoint) and put it back in the queue."""
        live = self.live.get(task_id)
        if live is None or live.busy or live.status != S.RUNNING:
            self.queue.preempting.discard(task_id)  # not now; the policy may ask again
            return
        live.busy = True
        log.info("preempting task %s", task_id)
        try:
            await self.executor.cancel(task_id, live.state)
        finally:
            live.busy = False
        if self.live.get(task_id) is not live:
            return
        now = time.time()
        if live.cancel_requested or live.status == S.CANCELLING:
            self.store.transition(task_id, S.CANCELLING, expected=S.RUNNING)
            live.status = S.CANCELLING
            self._finish(task_id, live, S.CANCELLED, reason="cancelled")
            return
        self._back_to_queue(task_id, live, now, outcome="preempted", reason=(
            f"preempted at {time.strftime('%H:%M:%S', time.gmtime(now))} UTC for a task with a "
            "higher claim; waiting again in its place by age"))

    def _back_to_queue(self, task_id: int, live: Live, now: float, *, reason: str, outcome: str,
                       executor_state: dict[str, Any] | None = None, exit_code: int | None = None,
                       run_reason: str | None = None, hold_until: float | None = None) -> bool:
        """A RUNNING task whose run ended waits again (preempted, its node failed, restarted): the run is
        charged and recorded (``outcome``), its place is its submission time; with ``hold_until`` it is kept
        out of the policy's queue until then. ``executor_state`` holds the service's keys to keep (the
        attempt and the requeue and restart counts are added). False when it moved on underneath (a cancel:
        it is then finished as cancelled)."""
        view = self.queue.running.get(task_id)
        if live.started_at is not None and view is not None:  # this run is charged like any other
            self.store.record_run(task_id, live.owner, view.gpus, live.started_at, now)
        kept = self._service_state(task_id, {**(executor_state or {}), ATTEMPT_KEY: live.attempt + 1})
        moved = self.store.transition(task_id, S.PENDING, expected=S.RUNNING, placement=None,
                                      executor_state=kept, started_at=None, reason=reason)
        if moved is None:  # moved on underneath (a cancel): finish it where it is
            rec = self.store.get(task_id)
            if rec is not None and rec.status == S.CANCELLING:
                live.status = S.CANCELLING
                self._finish(task_id, live, S.CANCELLED, reason="cancelled")
            return False
        self._record_attempt(task_id, live, now, outcome, exit_code=exit_code, reason=run_reason or reason)
        self.events.emit(TaskEvent("preempted" if outcome == "preempted" else "requeued", task_id, live.owner, now,
                                   reason=reason, gpus=live.placement.gpu_count if live.placement else 0))
        self.live.pop(task_id, None)
        self.attempts[task_id] = live.attempt + 1
        self.queue.requeue(task_id, now)
        if hold_until is not None:
            self._hold(task_id, hold_until)
        self._changed = True
        self.wake()
        return True

    async def _launch(self, rec: TaskRecord, live: Live, placement: Placement) -> None:
        assert rec.plan is not None
        plan = ExecutionPlan.model_validate(rec.plan)
        try:
            account = self.executor.identity.account(rec.owner)
        except IdentityError as exc:
            live.busy = False
            self._finish(rec.id, live, S.FAILED, reason=f"could not start: {exc}")
            return
        deadline = time.time() + live.time_limit  # a new run starts from the plan's limit
        try:
            state = await self.executor.launch(Launch(task_id=rec.id, owner=rec.owner, plan=plan, placement=placement,
                                                      attempt=live.attempt, deadline=deadline, account=account,
                                                      group=self.group_of(rec.owner), array_id=rec.array_id))
        except LaunchUnavailable as exc:
            self._launch_unavailable(rec, live, exc)
            return
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
        state = self._service_state(rec.id, {**state, ATTEMPT_KEY: live.attempt})
        live.state = state
        live.started_at = now
        moved = self.store.transition(rec.id, S.RUNNING, expected=S.STARTING, executor_state=state, started_at=now)
        live.busy = False
        if moved is None:
            # Should not happen (only we move STARTING tasks), but never leave processes behind.
            log.error("task %s left STARTING underneath the launch; stopping it", rec.id)
            await self.executor.cancel(rec.id, state)
            self.live.pop(rec.id, None)
            self.queue.drop(rec.id)
            now_rec = self.store.get(rec.id)
            self._group_ended(rec.id, now_rec.status if now_rec is not None else S.CANCELLED)
            return
        live.status = S.RUNNING
        self.events.emit(TaskEvent("started", rec.id, rec.owner, now, gpus=placement.gpu_count))
        if live.cancel_requested or moved.cancel_requested:
            if self.store.transition(rec.id, S.CANCELLING, expected=S.RUNNING) is not None:
                live.status = S.CANCELLING
                await self._kill(rec.id, S.CANCELLED, "cancelled")
        self.wake()

    # --- views ----------------------------------------------------------------------

    def explanations(self) -> dict[int, Explanation]:
        """Why each waiting task waits (see ``scheduler.explain``), at most ``explain_interval`` s old."""
        now = time.time()
        if self._changed and now - self._explained_at >= self.explain_interval:
            self._explained = nodes.with_foreign_note(self.cluster, self._holders(self.queue.explain(now, self.quotas)))
            self._explained_at = now
            self._changed = False
            self._note_over_quota()
        return self._explained

    def _holders(self, ex: dict[int, Explanation]) -> dict[int, Explanation]:
        """A task waiting on its user's GPU cap says which of the user's running tasks hold it, the user's Jupyter
        server first and by name: "...: your Jupyter server jupyter-bob (task 11) holds 1, task 12 holds 1"."""
        q = self.quotas
        if q is None:
            return ex
        held: dict[str, tuple[int, str]] = {}  # owner -> (GPUs held, who holds them)
        for tid, e in ex.items():
            t = self.queue.waiting.get(tid)
            if e.reason != "Quota" or t is None or f"user:{t.owner}" in q.exhausted:
                continue
            cap = q.user(t.owner).max_gpus
            if cap is None:
                continue
            if t.owner not in held:
                mine = sorted(((self._label(r.id), r.gpus, r.id) for r in self.queue.running.values()
                               if r.owner == t.owner and r.gpus),
                              key=lambda x: (not x[0].startswith("Jupyter server"), x[2]))  # the server first
                who = ", ".join(f"{'your ' if name.startswith('Jupyter server') else ''}{name} holds {g}"
                                for name, g, _ in mine)
                held[t.owner] = (sum(g for _, g, _ in mine), who)
            used, who = held[t.owner]
            if used and used + t.gpus > cap:
                ex[tid] = replace(e, detail=f"{e.detail}: {who}")
        return ex

    def _label(self, task_id: int) -> str:
        live = self.live.get(task_id)
        return live.label if live is not None and live.label else f"task {task_id}"

    def _note_over_quota(self) -> None:
        """Log each task that a quota change left unable ever to start (once per episode), and when it can again."""
        over = {tid for tid, e in self._explained.items() if e.reason == OVER_QUOTA}
        for tid in over - self._over_quota:
            log.warning("task %s (%s): %s", tid, self.queue.waiting[tid].owner if tid in self.queue.waiting else "?",
                        self._explained[tid].detail)
        for tid in self._over_quota - over:
            if tid in self.queue.waiting:
                log.info("task %s fits the quotas again", tid)
        self._over_quota = over

    def queue_info(self, rec: TaskRecord) -> Explanation | None:
        if rec.status == S.PENDING and rec.id in self.gated:  # a dependency or its array's max_running
            return self.gate_info(rec.id)
        if rec.status != S.PENDING or rec.id not in self.queue.waiting:
            return None
        info = self.explanations().get(rec.id)
        if info is None and self._changed:  # submitted since the last explanation
            self._explained_at = float("-inf")
            info = self.explanations().get(rec.id)
        return self._unavailable_info(info)

    def reason_for(self, rec: TaskRecord) -> str | None:
        if rec.status == S.PENDING:
            info = self.queue_info(rec)
            if info is not None:
                why = f"{info.reason}: {info.detail}" if info.detail else info.reason
                why = f"{why} (after: {rec.reason})" if rec.id in self.requeues and rec.reason else why
                return self.array_prefix(rec, why)
            return rec.reason or "queued"
        return rec.reason

    def status_of(self, task_id: int) -> TaskStatus | None:
        live = self.live.get(task_id)
        if live is not None:
            return live.status
        if task_id in self.queue.waiting or task_id in self.held or task_id in self.gated:
            return S.PENDING
        return None

    # --- time and runs (issue 19) -------------------------------------------------------

    def time_info(self, rec: TaskRecord, now: float | None = None) -> dict[str, Any]:
        """The task JSON's time and run fields, from the live view (no query): ``time_limit`` (effective, this
        run's extensions included), ``deadline`` and ``time_left`` (a running task's), ``attempt`` (the
        current run, or the next one of a waiting task, or the last one of an ended task), ``max_restarts``."""
        now = time.time() if now is None else now
        live = self.live.get(rec.id)
        plan_limit = int(((rec.plan or {}).get("resources") or {}).get("time_limit", 0)) or None
        if plan_limit is None:
            plan_limit = int(((rec.spec or {}).get("resources") or {}).get("time_limit", 3600))
        most, _ = restart_policy(rec.spec)
        if live is not None and live.started_at is not None and live.status in (S.RUNNING, S.CANCELLING):
            deadline = live.started_at + live.limit
            return {"time_limit": live.limit, "deadline": deadline, "time_left": max(0.0, deadline - now),
                    "attempt": live.attempt, "max_restarts": most}
        attempt = live.attempt if live is not None else self.attempts.get(rec.id, _state_int(rec.executor_state,
                                                                                              ATTEMPT_KEY))
        limit = plan_limit
        if rec.status.is_terminal():
            limit += _state_int(rec.executor_state, EXTENDED_KEY)  # its last run's extensions
        return {"time_limit": limit, "deadline": None, "time_left": None, "attempt": attempt, "max_restarts": most}

    def runs(self, rec: TaskRecord) -> list[dict[str, Any]]:
        """The task's runs, first first: the ended ones (``Store.attempts``), then the current one as "running"."""
        out = [a.to_json() for a in self.store.attempts(rec.id)]
        live = self.live.get(rec.id)
        if live is not None and live.started_at is not None and live.status in (S.RUNNING, S.CANCELLING):
            out.append({"attempt": live.attempt, "started_at": live.started_at, "finished_at": None,
                        "outcome": "running", "exit_code": None, "reason": None,
                        "nodes": [s.node for s in live.placement.nodes] if live.placement else []})
        return out

    async def extend(self, rec: TaskRecord, seconds: int, by_user: str, *, max_time_limit: int) -> TaskRecord:
        """Give a running task's current run ``seconds`` more (see ``running.ExtendHandler``).

        Conflict: not running. LimitRefused (field ``seconds``): the run's new limit over ``max_time_limit``,
        or the added GPU-hours over what is left of the owner's or its group's budget this period.
        ExecutorFailed: the cluster refused the new limit (nothing recorded then)."""
        async with self._extending:
            live = self.live.get(rec.id)
            if live is None or live.status != S.RUNNING or live.started_at is None or live.cancel_requested:
                status = live.status if live is not None else (self.store.get(rec.id) or rec).status
                what = "being cancelled" if live is not None and live.cancel_requested else str(status)
                raise Conflict(f"task {rec.id} is {what}, not running: only a running task's time limit can be "
                               "extended")
            before = live.limit
            after = before + seconds
            if after > max_time_limit:
                raise LimitRefused("seconds", f"a time limit of {after} s ({_hms(after)}) is over the site's "
                                   f"max_time_limit of {max_time_limit} s ({_hms(max_time_limit)}); this run "
                                   f"can be extended by at most {max(0, max_time_limit - before)} s")
            self._check_budget(rec, live, seconds)
            try:
                await self.executor.set_time_limit(rec.id, live.state, after)
            except Exception as exc:
                log.warning("task %s: the executor refused the new time limit %s s: %s", rec.id, after, exc)
                raise ExecutorFailed(f"the {self.executor.name} executor could not set task {rec.id}'s time "
                                     f"limit to {after} s: {exc}"[:2000]) from None
            if self.live.get(rec.id) is not live or live.status != S.RUNNING:
                raise Conflict(f"task {rec.id} ended while its time limit was being extended")
            self.store.add_extension(rec.id, seconds, by_user)
            live.extended += seconds
            live.state = {**live.state, EXTENDED_KEY: live.extended}
            self.store.update(rec.id, expected=(S.RUNNING,), executor_state=live.state)
            self.store.add_audit(by_user, "extend", rec.id, {"seconds": seconds, "before": before, "after": after},
                                 target=f"task:{rec.id}", before={"time_limit": before}, after={"time_limit": after},
                                 request_id=requestid.current())
            log.info("task %s: time limit extended by %s s to %s s by %s", rec.id, seconds, after, by_user)
            return self.store.get(rec.id) or rec

    def _check_budget(self, rec: TaskRecord, live: Live, seconds: int) -> None:
        """The extension's GPU-hours (GPUs x seconds) must fit what is left of the owner's and its group's
        GPU-hour budgets this period (LimitRefused naming the budget and what is left)."""
        q = self.quotas
        view = self.queue.running.get(rec.id)
        gpus = view.gpus if view is not None else (live.placement.gpu_count if live.placement else 0)
        if q is None or gpus <= 0 or not self._has_budgets():
            return
        now = time.time()
        usage = self.store.gpu_seconds_by_owner(period_start(now, self.quota_period), now)
        group = self.group_of(rec.owner)
        need = gpus * seconds / 3600.0
        for kind, name, budget, used_s in (
                ("user", rec.owner, q.user(rec.owner).gpu_hours, usage.get(rec.owner, 0.0)),
                ("group", group, q.group(group).gpu_hours, usage_by_group(usage, self.groups).get(group, 0.0))):
            if budget is None:
                continue
            left = max(0.0, budget - used_s / 3600.0)
            if need > left:
                raise LimitRefused("seconds", f"extending by {seconds} s needs {need:.2f} GPU-hours ({gpus} GPUs x "
                                   f"{seconds} s); {kind} {name}'s budget of {budget:g} GPU-hours per "
                                   f"{self.quota_period} has {left:.2f} GPU-hours left")


def _hms(seconds: int) -> str:
    """Seconds for people: 7d, 1h30m, 45m, 90s."""
    d, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{d}d" if d else "", f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s else ""]
    return "".join(parts) or "0s"
