"""The controller's part for many tasks at once (issue 20): arrays, pipelines, dependencies.

:class:`GroupsMixin` is a mixin of :class:`~tacc_hub.service.controller.Controller`.

Invariants:
- A waiting task is *gated* (kept out of the policy's queue, in ``gated``) while a dependency of
  its is not met, or while its array already has ``max_running`` elements admitted (in the policy's
  queue, starting, running, or held for a restart): at most ``max_running`` at once, ever, since an
  element counts from its admission until it ends (a preempted or requeued element keeps its slot).
  Slots go to the lowest index first.
- The gates are derived from the store alone (dependency rows and task states), so they are rebuilt
  the same after a restart of the service (``_recover_groups``); after a restart the elements already
  started keep their slots and the rest are admitted lowest index first.
- Nothing scans the gated tasks on a scheduling pass: an ended task wakes only the tasks waiting on it
  (``waiters``, by the task or array waited on) and its array's next element (a heap by index).
- A dependency that can no longer be met ends the waiting task as CANCELLED at once, with a reason
  naming what it waited on (``dependency can never be met: task 12 (prepare) failed``); that ends what
  waits on it in turn, each reason naming its own dependency and the first cause.
- Dependencies and inputs name only the owner's own tasks and arrays (anyone else's: ``NotFound``,
  as if there were none). Cycles cannot be written: a task can only name tasks that exist.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tacc_hub.compiler import compile_elements, compile_task, with_array_inputs
from tacc_hub.scheduler.policy import Explanation, TaskView
from tacc_hub.schema import SpecError, TaskSpec
from tacc_hub.schema.groups import TaskInput
from tacc_hub.store import ArrayRecord, NewTask, PipelineRecord, Store, TaskRecord, TaskStatus
from tacc_hub.store.groups import Members, PipelineStepRows, StepRef, TaskBrief

if TYPE_CHECKING:
    from tacc_hub.compiler import ExecutionPlan, SiteProfile
    from tacc_hub.scheduler.queue import LiveQueue
    from tacc_hub.schema.pipeline import PipelineSpec

    from .controller import Live

log = logging.getLogger("tacc_hub.controller")

S = TaskStatus
DEP_PREFIX = "dependency can never be met: "
_BAD = frozenset({S.FAILED, S.LOST, S.CANCELLED})
_RUNNING = frozenset({S.STARTING, S.RUNNING, S.CANCELLING})
_NOT_ENDED = (S.PENDING, S.STARTING, S.RUNNING, S.CANCELLING)
_VERB = {"succeeded": "succeed", "finished": "finish", "failed": "fail"}

DepKey = tuple[str, int, str]  # (kind, id waited on, when)
MET, WAIT, NEVER = "met", "wait", "never"


class NotFound(Exception):
    """A task or array named in a request that does not exist or is not the caller's (HTTP 404)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(slots=True)
class Gate:
    """A waiting task kept out of the policy's queue: its view, until its dependencies are met and its array
    has a slot for it."""

    view: TaskView
    partition: str | None
    gpu_type: str | None
    array_id: int | None
    index: int
    unmet: tuple[DepKey, ...]  # dependencies not met yet; () = waits only for an array slot
    waits_on: str = ""  # for people: "waits for task 12 (prepare) to succeed"


@dataclass(slots=True)
class ArrayGate:
    """An array with elements not ended yet."""

    id: int
    name: str
    size: int
    max_running: int | None
    members: set[int] = field(default_factory=set)  # elements not ended
    admitted: set[int] = field(default_factory=set)  # counted against max_running: queued, starting, running, held
    ready: list[tuple[int, int]] = field(default_factory=list)  # heap (index, task id): dependencies met, no slot


class GroupsMixin:
    # what the controller provides
    store: Store
    queue: LiveQueue
    live: dict[int, Live]
    held: dict[int, tuple[float, TaskView]]
    attempts: dict[int, int]
    site: SiteProfile
    explain_interval: float
    _explained_at: float
    _changed: bool
    wake: Callable[[], None]
    group_of: Callable[[str], str]
    _view: Callable[..., TaskView]
    _site_for: Callable[[str | None], SiteProfile]
    _check_snapshot: Callable[[TaskSpec], None]
    _check_fit: Callable[[TaskSpec, str | None], None]
    explanations: Callable[[], dict[int, Explanation]]
    reason_for: Callable[[TaskRecord], str | None]
    cancel: Callable[[TaskRecord], Any]

    def _init_groups(self, threaded: bool) -> None:
        self.gated: dict[int, Gate] = {}
        self.waiters: dict[tuple[str, int], set[int]] = {}  # (kind, id waited on) -> gated tasks waiting on it
        self._any_waiters: dict[int, set[int]] = {}  # array -> gated tasks waiting for any of it to finish
        self.arrays: dict[int, ArrayGate] = {}
        self.element_of: dict[int, int] = {}  # element not ended -> its array
        self._progress: dict[int, tuple[float, int, int]] = {}  # array -> (when, running, waiting), cached
        self._groups_threaded = threaded  # the store may be written from a worker thread

    # --- submit -----------------------------------------------------------------------

    async def _off(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` in a worker thread when the store has connections of its own (as the batcher does)."""
        if self._groups_threaded:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    def _check_refs(self, owner: str, spec: TaskSpec, where: str = "", *, pipeline: bool = False) -> list[DepKey]:
        """``spec``'s dependencies as keys, each checked: it names one of ``owner``'s tasks or arrays (else
        NotFound), and it can still be met (else SpecError naming ``depends_on[i]``). Inputs naming a task or
        array are checked the same way, and imply a dependency on their producer having ended (``finished``,
        ``all_finished``) unless the spec names one on it already; ``from`` only inside a pipeline (where the
        step's ``needs`` orders it)."""
        deps: list[DepKey] = []
        tasks_named = [d.task for d in spec.depends_on if d.task is not None]
        tasks_named += [i.task for i in spec.inputs if i.task is not None]
        arrays_named = [d.array for d in spec.depends_on if d.array is not None]
        arrays_named += [i.array for i in spec.inputs if i.array is not None]
        briefs = self.store.task_briefs(tasks_named) if tasks_named else {}
        arrays = self.store.arrays_by_id(arrays_named) if arrays_named else {}
        for i, d in enumerate(spec.depends_on):
            if d.task is not None:
                b = briefs.get(d.task)
                if b is None or b.owner != owner:
                    raise NotFound(f"{where}depends_on[{i}].task", f"no task {d.task}")
                deps.append(("task", d.task, str(d.when)))
            else:
                assert d.array is not None
                a = arrays.get(d.array)
                if a is None or a.owner != owner:
                    raise NotFound(f"{where}depends_on[{i}].array", f"no array {d.array}")
                deps.append(("array", d.array, str(d.when)))
        for i, inp in enumerate(spec.inputs):
            if inp.task is not None and (inp.task not in briefs or briefs[inp.task].owner != owner):
                raise NotFound(f"{where}inputs[{i}].task", f"no task {inp.task}")
            if inp.array is not None and (inp.array not in arrays or arrays[inp.array].owner != owner):
                raise NotFound(f"{where}inputs[{i}].array", f"no array {inp.array}")
            if inp.from_ is not None and not pipeline:
                raise SpecError.one(f"{where}inputs[{i}].from", "names a pipeline step: only a pipeline's steps "
                                    "may use from (give task: ID or array: ID)")
        states = self._dep_states(set(deps))
        for i, key in enumerate(deps):
            state, text = states[key]
            if state == NEVER:
                raise SpecError.one(f"{where}depends_on[{i}]", f"can never be met: {text}")
        named = {(k, on) for k, on, _ in deps}
        for inp in spec.inputs:  # the copy is made when the consumer starts: after its producer ended
            if inp.task is not None and ("task", inp.task) not in named:
                deps.append(("task", inp.task, "finished"))
            if inp.array is not None and ("array", inp.array) not in named:
                deps.append(("array", inp.array, "all_finished"))
        return list(dict.fromkeys(deps))

    def _members(self, spec: TaskSpec) -> dict[int, list[tuple[int, int]]]:
        """The elements, [(index, task id)], of each existing array the spec's inputs name (``with_array_inputs``)."""
        return {aid: sorted((int(b.array_index or 0), b.id) for b in self.store.group_briefs(array_id=aid))
                for aid in {i.array for i in spec.inputs if i.array is not None}}

    def _precheck(self, spec: TaskSpec, owner: str) -> None:
        """What ``compile`` checks besides the plan, once for specs that share ``spec``'s code and resources (the
        elements of one array): the snapshot is uploaded, the task can fit the cluster and the owner's quotas."""
        self._check_snapshot(spec)
        self._check_fit(spec, owner)

    @staticmethod
    def _element_rows(owner: str, elements: Sequence[TaskSpec], site: SiteProfile, now: float,
                      members: Members | None = None) -> list[NewTask]:
        """One row per element, each with its own plan (``compile_elements``: what ``compile_task(element)`` gives,
        without redoing what the elements share; array inputs get their producers' elements, ``with_array_inputs``)."""
        rows: list[NewTask] = []
        for el, plan in zip(elements, compile_elements(list(elements), site), strict=True):
            if members:
                plan = with_array_inputs(plan, dict(members))
            assert el.array_element is not None
            rows.append(NewTask(owner=owner, name=el.name, digest=plan.task_digest,
                                spec=el.model_dump(mode="json", by_alias=True), plan=plan.model_dump(mode="json"),
                                submitted_at=now, array_index=el.array_element.index))
        return rows

    async def submit_array(self, owner: str, spec: TaskSpec) -> tuple[ArrayRecord, list[TaskRecord]]:
        """Expand ``spec.array``, compile every element, check quotas (per element, as ``submit``) and
        dependencies, insert the array in one transaction, and gate or queue its elements."""
        from tacc_hub.schema.arrays import expand

        if spec.array is None:
            raise SpecError.one("array", "this spec has no array: submit it as one task")
        deps = self._check_refs(owner, spec)
        self._precheck(spec, owner)  # the elements share its code and resources
        site = self._site_for(owner)
        max_running = spec.array.max_running
        members = self._members(spec)
        rows = await self._off(lambda: self._element_rows(owner, expand(spec), site, time.time(), members))
        arr, recs = await self._off(lambda: self.store.insert_array(owner, spec.name, rows, max_running=max_running,
                                                                    deps=deps))
        self._place_new(recs, {r.id: deps for r in recs} if deps else {}, [arr])
        self.wake()
        return arr, recs

    async def _submit_linked(self, owner: str, spec: TaskSpec, plan: ExecutionPlan) -> TaskRecord:
        """``submit`` of a task with ``depends_on`` or ``inputs`` (checked first; then gated if need be)."""
        deps = self._check_refs(owner, spec)
        members = self._members(spec)
        if members:
            plan = with_array_inputs(plan, members)
        dumped = spec.model_dump(mode="json", by_alias=True)
        row = NewTask(owner=owner, name=spec.name, digest=plan.task_digest, spec=dumped,
                      plan=plan.model_dump(mode="json"), submitted_at=time.time())
        rec = await self._off(self.store.insert_with_deps, row, deps)
        self._place_new([rec], {rec.id: deps} if deps else {}, [])
        self.wake()
        return rec

    async def submit_pipeline(self, owner: str, p: PipelineSpec) -> tuple[PipelineRecord, list[TaskRecord]]:
        """Submit every step of ``p`` in one transaction, each waiting for the steps it needs (an array step:
        all its elements) to succeed; ``inputs.from`` resolved to the producing step's task or array id."""
        order = p.order()
        index = {s.name: i for i, s in enumerate(p.steps)}
        site = self._site_for(owner)
        plans: list[PipelineStepRows] = []
        for step in order:
            where = f"steps[{index[step.name]}].spec."
            spec = step.spec
            try:
                own = self._check_refs(owner, spec, where, pipeline=True)
                self._precheck(spec, owner)
            except SpecError as exc:
                raise SpecError([(f if f.startswith("steps[") else f"{where}{f}", m) for f, m in exc.errors]) from None
            plans.append(PipelineStepRows(
                name=step.name, needs=list(step.needs), array=spec.array is not None,
                max_running=spec.array.max_running if spec.array is not None else None, deps=own,
                rows=self._step_builder(owner, spec, site, where, self._members(spec))))
        pipe, recs = await self._off(self.store.insert_pipeline, owner, p.name, plans)
        deps = self.store.dependencies(r.id for r in recs)
        arrays = self.store.arrays_by_id({r.array_id for r in recs if r.array_id is not None})
        self._place_new(recs, {t: [(d.kind, d.on_id, d.when) for d in ds] for t, ds in deps.items()},
                        list(arrays.values()))
        self.wake()
        return pipe, recs

    def _step_builder(self, owner: str, spec: TaskSpec, site: SiteProfile, where: str,
                      outside: Members) -> Callable[[Mapping[str, StepRef], Members], list[NewTask]]:
        """The rows of one pipeline step, built inside the pipeline's transaction once the steps before it have
        ids: ``inputs.from`` becomes ``task``/``array``, then every task (or element) is compiled, its array
        inputs given their elements (of earlier steps, or ``outside`` the pipeline)."""
        from tacc_hub.schema.arrays import expand

        def build(done: Mapping[str, StepRef], inside: Members) -> list[NewTask]:
            s = spec
            if any(i.from_ is not None for i in s.inputs):
                resolved = []
                for inp in s.inputs:
                    if inp.from_ is None:
                        resolved.append(inp)
                        continue
                    kind, ref = done[inp.from_]
                    resolved.append(TaskInput.model_validate({kind: ref, "path": inp.path, "to": inp.to}))
                s = s.model_copy(update={"inputs": resolved})
            members = {**outside, **inside}
            try:
                now = time.time()
                if s.array is not None:
                    return self._element_rows(owner, expand(s), site, now, members)
                plan = compile_task(s, site)
                if members:
                    plan = with_array_inputs(plan, members)
            except SpecError as exc:
                raise SpecError([(f"{where}{f}", m) for f, m in exc.errors]) from None
            return [NewTask(owner=owner, name=s.name, digest=plan.task_digest,
                            spec=s.model_dump(mode="json", by_alias=True), plan=plan.model_dump(mode="json"),
                            submitted_at=now)]

        return build

    # --- gates --------------------------------------------------------------------------

    def _place_new(self, recs: Sequence[TaskRecord], deps: Mapping[int, Sequence[DepKey]],
                   arrays: Iterable[ArrayRecord]) -> None:
        """Newly inserted tasks: each gated while a dependency is unmet or its array has no slot, else queued.
        A dependency that became impossible since it was checked (it ended meanwhile) cancels the task."""
        for arr in arrays:
            self.arrays[arr.id] = ArrayGate(arr.id, arr.name, arr.size, arr.max_running)
        states = self._dep_states({k for ks in deps.values() for k in ks})
        touched: set[int] = set()
        doomed: list[tuple[int, str]] = []
        for rec in recs:
            if rec.array_id is not None:
                ag = self.arrays.get(rec.array_id)
                if ag is not None:
                    ag.members.add(rec.id)
                    self.element_of[rec.id] = rec.array_id
                    touched.add(rec.array_id)
            view = self._view(rec.id, rec.owner, rec.name, rec.digest, rec.submitted_at, rec.spec)
            r = (rec.spec or {}).get("resources", {})
            gate = Gate(view, r.get("partition"), r.get("gpu_type"), rec.array_id, rec.array_index or 0, ())
            self.gated[rec.id] = gate
            never = self._apply_states(rec.id, gate, deps.get(rec.id, ()), states)
            if never is not None:
                doomed.append((rec.id, never))
        for aid in touched:
            self._fill(self.arrays[aid])
        if doomed:
            self._cancel_unmet(doomed)

    def _apply_states(self, tid: int, gate: Gate, keys: Iterable[DepKey],
                      states: Mapping[DepKey, tuple[str, str]]) -> str | None:
        """Set ``gate.unmet`` from ``states``; register it with what it still waits on, or make it ready.
        Returns the cause when some dependency can never be met (the caller cancels it)."""
        unmet: list[DepKey] = []
        for k in keys:
            state, text = states[k]
            if state == NEVER:
                return text
            if state == WAIT:
                unmet.append(k)
        for k in gate.unmet:
            if k not in unmet:
                self._unwait(tid, k)
        gate.unmet = tuple(unmet)
        if unmet:
            gate.waits_on = states[unmet[0]][1]
            for k in unmet:
                self.waiters.setdefault((k[0], k[1]), set()).add(tid)
                if k[2] == "any_finished":
                    self._any_waiters.setdefault(k[1], set()).add(tid)
        else:
            self._ready(tid, gate)
        return None

    def _unwait(self, tid: int, key: DepKey) -> None:
        ws = self.waiters.get((key[0], key[1]))
        if ws is not None:
            ws.discard(tid)
            if not ws:
                del self.waiters[(key[0], key[1])]
        if key[2] == "any_finished":
            anys = self._any_waiters.get(key[1])
            if anys is not None:
                anys.discard(tid)
                if not anys:
                    del self._any_waiters[key[1]]

    def _ready(self, tid: int, gate: Gate) -> None:
        """Its dependencies are met: into the policy's queue, or its array's line for a slot."""
        ag = self.arrays.get(gate.array_id) if gate.array_id is not None else None
        if ag is not None and ag.max_running is not None:
            heapq.heappush(ag.ready, (gate.index, tid))
            gate.waits_on = ""
            if len(ag.admitted) < ag.max_running:
                self._fill(ag)
            return
        del self.gated[tid]
        if ag is not None:
            ag.admitted.add(tid)
        self._admit(tid, gate)

    def _admit(self, tid: int, gate: Gate) -> None:
        view = gate.view
        group = self.group_of(view.owner)
        self.queue.add(view if view.group == group else replace(view, group=group), gate.partition, gate.gpu_type)
        self._changed = True

    def _fill(self, ag: ArrayGate) -> None:
        """Admit the array's ready elements, lowest index first, while it has slots."""
        while ag.ready and (ag.max_running is None or len(ag.admitted) < ag.max_running):
            _, tid = heapq.heappop(ag.ready)
            gate = self.gated.get(tid)
            if gate is None or gate.unmet or tid in ag.admitted:
                continue  # ended meanwhile (a stale entry)
            del self.gated[tid]
            ag.admitted.add(tid)
            self._admit(tid, gate)

    def _group_ended(self, task_id: int, status: TaskStatus) -> None:
        """A task ended (``_finish``, a cancel): free its array slot, re-check what waits on it, cascading."""
        keys = self._forget(task_id, status)
        if keys:
            self._recheck(keys)

    def _forget(self, task_id: int, status: TaskStatus) -> list[tuple[str, int]]:
        """Drop an ended task from the gates; the (kind, id) keys whose waiters must be re-checked."""
        gate = self.gated.pop(task_id, None)
        if gate is not None:
            for k in gate.unmet:
                self._unwait(task_id, k)
        keys: list[tuple[str, int]] = []
        aid = self.element_of.pop(task_id, None)
        if aid is not None:
            ag = self.arrays.get(aid)
            if ag is not None:
                ag.members.discard(task_id)
                ag.admitted.discard(task_id)
                self._progress.pop(aid, None)
                self._fill(ag)
                if not ag.members:
                    del self.arrays[aid]
                ws = self.waiters.get(("array", aid))
                # all_* can only change with the last element or a failure; any_finished with the first end
                if ws and (not ag.members or status != S.SUCCEEDED or self._any_waiters.get(aid)):
                    keys.append(("array", aid))
        if ("task", task_id) in self.waiters:
            keys.append(("task", task_id))
        return keys

    def _recheck(self, keys: Iterable[tuple[str, int]]) -> None:
        """Re-evaluate the tasks waiting on these tasks or arrays; release the met, cancel the impossible (and
        then what waits on those, in turn: a worklist, not recursion)."""
        work = deque(keys)
        while work:
            key = work.popleft()
            tids = sorted(self.waiters.get(key, ()))
            gates = [(t, self.gated[t]) for t in tids if t in self.gated]
            if not gates:
                self.waiters.pop(key, None)
                if key[0] == "array":
                    self._any_waiters.pop(key[1], None)
                continue
            states = self._dep_states({k for _, g in gates for k in g.unmet})
            doomed: list[tuple[int, str]] = []
            for tid, gate in gates:
                if self.gated.get(tid) is not gate:
                    continue
                never = self._apply_states(tid, gate, gate.unmet, states)
                if never is not None:
                    doomed.append((tid, never))
            if doomed:
                work.extend(self._cancel_unmet(doomed, cascade=False))

    def _cancel_unmet(self, doomed: Sequence[tuple[int, str]], *, cascade: bool = True) -> list[tuple[str, int]]:
        """End waiting tasks whose dependency can never be met as CANCELLED, each with its cause (one guarded
        statement per cause: an array's 1,000 elements are one write); the keys to re-check (or, with
        ``cascade``, re-checked here)."""
        by_cause: dict[str, list[int]] = {}
        for tid, cause in doomed:
            by_cause.setdefault(cause, []).append(tid)
        now = time.time()
        keys: list[tuple[str, int]] = []
        for cause, tids in by_cause.items():
            reason = DEP_PREFIX + cause
            gone = self.store.cancel_pending(tids, reason=reason, at=now)
            for tid in set(tids) - set(gone):
                log.warning("task %s: %s, but it is no longer pending", tid, reason)
            if not gone:
                continue
            log.info("%s cancelled: %s", _ids(gone), reason)
            for tid in gone:  # out of every queue first, then the gates (no freed slot admits one of them)
                self.queue.drop(tid)
                self.held.pop(tid, None)
                self.attempts.pop(tid, None)
            for tid in gone:
                keys.extend(self._forget(tid, S.CANCELLED))
            self._changed = True
        if cascade and keys:
            self._recheck(keys)
            return []
        return keys

    # --- dependency states --------------------------------------------------------------

    def _dep_states(self, keys: set[DepKey]) -> dict[DepKey, tuple[str, str]]:
        """(met | wait | never, for people) of each dependency: one query for the tasks, one for the arrays."""
        out: dict[DepKey, tuple[str, str]] = {}
        if not keys:
            return out
        task_ids = {k[1] for k in keys if k[0] == "task"}
        array_ids = {k[1] for k in keys if k[0] == "array"}
        briefs = self.store.task_briefs(task_ids) if task_ids else {}
        counts = self.store.array_counts(array_ids) if array_ids else {}
        arrays = self.store.arrays_by_id(array_ids) if array_ids else {}
        firsts: dict[int, TaskRecord | None] = {}  # an array's first element that did not succeed: the cause
        for k in keys:
            kind, on, when = k
            if kind == "task":
                out[k] = _task_state(on, when, briefs.get(on))
                continue
            c = counts.get(on, {})
            if when == "all_succeeded" and on not in firsts and any(c.get(s.value) for s in _BAD):
                got = self.store.array_tasks(on, sorted(_BAD), limit=1)
                firsts[on] = got[0] if got else None
            out[k] = _array_state(on, when, arrays.get(on), c, firsts.get(on))
        return out

    # --- recovery -------------------------------------------------------------------------

    def _recover_groups(self, active: Sequence[TaskRecord]) -> None:
        """Rebuild the gates from the store after a (re)start: the array of every element not ended, what every
        waiting task still waits for, and the array slots (the elements started keep theirs; then the lowest
        indexes). Called after the active tasks were queued or adopted, before they are observed."""
        aids = {r.array_id for r in active if r.array_id is not None}
        for arr in self.store.arrays_by_id(aids).values():
            self.arrays[arr.id] = ArrayGate(arr.id, arr.name, arr.size, arr.max_running)
        waiting = [r for r in active if r.id in self.queue.waiting]
        deps = self.store.dependencies(r.id for r in waiting)
        states = self._dep_states({(d.kind, d.on_id, d.when) for ds in deps.values() for d in ds})
        for r in active:
            if r.array_id is not None and r.array_id in self.arrays:
                owner_of = self.arrays[r.array_id]
                owner_of.members.add(r.id)
                self.element_of[r.id] = r.array_id
                if r.id not in self.queue.waiting:  # started (or held for a restart): it keeps its slot
                    owner_of.admitted.add(r.id)
        doomed: list[tuple[int, str]] = []
        free: dict[int, list[tuple[int, TaskRecord]]] = {}  # capped array -> elements free to run, (index, rec)
        for r in waiting:
            ag = self.arrays.get(r.array_id) if r.array_id is not None else None
            keys = [(d.kind, d.on_id, d.when) for d in deps.get(r.id, ())]
            never = next((states[k][1] for k in keys if states[k][0] == NEVER), None)
            if never is not None:
                doomed.append((r.id, never))  # cancelled below (out of the queue there)
                continue
            unmet = [k for k in keys if states[k][0] == WAIT]
            if unmet:
                self._apply_states(r.id, self._gate_out(r), unmet, states)
            elif ag is not None and ag.max_running is not None:
                free.setdefault(ag.id, []).append((r.array_index or 0, r))
            elif ag is not None:
                ag.admitted.add(r.id)  # stays queued
        for aid, elems in free.items():  # the slots left go to the lowest indexes; they stay queued (no re-sort)
            ag = self.arrays[aid]
            elems.sort(key=lambda e: e[0])
            room = max(0, (ag.max_running or 0) - len(ag.admitted))
            for _, r in elems[:room]:
                ag.admitted.add(r.id)
            for index, r in elems[room:]:
                self._gate_out(r)
                heapq.heappush(ag.ready, (index, r.id))
        if doomed:
            self._cancel_unmet(doomed)
        if self.gated:
            log.info("recovered %d waiting tasks held back by a dependency or an array's max_running",
                     len(self.gated))

    def _gate_out(self, r: TaskRecord) -> Gate:
        """Take a recovered waiting task out of the policy's queue into a gate (its dependencies: the caller's)."""
        view = self.queue.waiting.pop(r.id)
        res = (r.spec or {}).get("resources", {})
        gate = Gate(view, res.get("partition"), res.get("gpu_type"), r.array_id, r.array_index or 0, ())
        self.gated[r.id] = gate
        self._changed = True
        return gate

    # --- cancel -------------------------------------------------------------------------

    async def cancel_array(self, array_id: int) -> int:
        """Cancel every element of the array not ended: the waiting ones at once (one statement, the executor
        untouched), the others through ``cancel``. Returns how many were moved to cancelled or cancelling."""
        return await self._cancel_group(self.store.group_briefs(array_id=array_id, states=_NOT_ENDED))

    async def cancel_pipeline(self, pipeline_id: int) -> int:
        """Cancel every task of the pipeline not ended (as ``cancel_array``)."""
        return await self._cancel_group(self.store.group_briefs(pipeline_id=pipeline_id, states=_NOT_ENDED))

    async def _cancel_group(self, briefs: Sequence[TaskBrief]) -> int:
        pending = [b.id for b in briefs if b.status == S.PENDING]
        # Guarded (PENDING only), so it may run in a worker thread: one started meanwhile is not touched here
        # and is cancelled below, where it is by then.
        gone = await self._off(lambda: self.store.cancel_pending(pending, reason="cancelled before it started",
                                                                 at=time.time())) if pending else []
        for tid in gone:  # out of every queue first, so that no slot freed below admits one of them
            self.queue.drop(tid)
            self.held.pop(tid, None)
            self.attempts.pop(tid, None)
        keys: list[tuple[str, int]] = []
        for tid in gone:
            keys.extend(self._forget(tid, S.CANCELLED))
        if keys:
            self._recheck(keys)
        n = len(gone)
        self._changed = True
        done = set(gone)
        for b in briefs:
            if b.id in done or b.status == S.CANCELLING:
                continue
            rec = self.store.get(b.id)
            if rec is None or rec.status.is_terminal() or rec.status == S.CANCELLING:
                continue
            try:
                got = await self.cancel(rec)
                if got.status in (S.CANCELLED, S.CANCELLING) or got.cancel_requested:
                    n += 1
            except Exception as exc:  # ended meanwhile (Conflict): nothing to do
                log.debug("cancel of task %s: %s", b.id, exc)
        self.wake()
        return n

    # --- views --------------------------------------------------------------------------

    def gate_info(self, task_id: int) -> Explanation | None:
        """Why a gated task waits: ``Dependency`` (what on) or ``ArrayLimit`` (its array's slots are taken)."""
        gate = self.gated.get(task_id)
        if gate is None:
            return None
        position = len(self.queue.waiting) + 1
        if gate.unmet:
            return Explanation("Dependency", position, None, gate.waits_on)
        ag = self.arrays.get(gate.array_id) if gate.array_id is not None else None
        if ag is None:
            return Explanation("ArrayLimit", position, None, "")
        return Explanation("ArrayLimit", position, None,
                           f"{len(ag.admitted)} of {ag.size} running (max_running {ag.max_running})")

    def array_progress(self, array_id: int) -> tuple[int, int] | None:
        """(running, waiting) elements of an array with elements not ended, from memory (cached a moment)."""
        ag = self.arrays.get(array_id)
        if ag is None:
            return None
        now = time.monotonic()
        hit = self._progress.get(array_id)
        if hit is not None and now - hit[0] < self.explain_interval:
            return hit[1], hit[2]
        running = sum(1 for t in ag.members if t in self.live)
        self._progress[array_id] = (now, running, len(ag.members) - running)
        return running, len(ag.members) - running

    def array_prefix(self, rec: TaskRecord, why: str) -> str:
        """A waiting element's reason with its array's progress first: "12 of 50 running, 38 waiting: ..."."""
        if rec.array_id is None:
            return why
        ag = self.arrays.get(rec.array_id)
        got = self.array_progress(rec.array_id)
        if ag is None or got is None:
            return why
        return f"{got[0]} of {ag.size} running, {got[1]} waiting: {why}"

    def _first_waiting_reason(self, ag: ArrayGate) -> str | None:
        """The reason of the array's first waiting element (its queue explanation, else its gate)."""
        queued = [t for t in ag.admitted if t in self.queue.waiting]
        if not queued and ag.max_running is None:
            queued = [t for t in ag.members if t in self.queue.waiting]
        if queued:
            first = min(queued)
            info = self.explanations().get(first)
            if info is None and self._changed:  # queued since the last explanation
                self._explained_at = float("-inf")
                info = self.explanations().get(first)
            if info is not None:
                return info.reason
        gated = [t for t in ag.members if t in self.gated]
        if gated:
            info = self.gate_info(min(gated))
            if info is not None:
                return info.reason
        return None

    def array_summary(self, arr: ArrayRecord) -> dict[str, Any]:
        """Where an array's elements stand: counts per status, running/waiting/done/failed, the aggregate status
        and a reason for people ("12 of 50 running, 38 waiting: Priority")."""
        counts = self.store.array_counts([arr.id]).get(arr.id, {})
        running = sum(counts.get(s.value, 0) for s in _RUNNING)
        waiting = counts.get(S.PENDING.value, 0)
        done = counts.get(S.SUCCEEDED.value, 0)
        failed = counts.get(S.FAILED.value, 0) + counts.get(S.LOST.value, 0)
        status = _aggregate(counts, arr.size)
        reason: str | None
        if waiting:
            ag = self.arrays.get(arr.id)
            why = self._first_waiting_reason(ag) if ag is not None else None
            reason = f"{running} of {arr.size} running, {waiting} waiting" + (f": {why}" if why else "")
        elif running:
            reason = f"{running} of {arr.size} running"
        else:
            ended = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            reason = f"all {arr.size} ended: {ended}" if ended else None
        return {"counts": counts, "running": running, "waiting": waiting, "done": done, "failed": failed,
                "status": status, "reason": reason}

    def pipeline_summary(self, p: PipelineRecord) -> dict[str, Any]:
        """Each step's task or array, its status and reason; the pipeline's aggregate status."""
        recs = {r.id: r for r in self.store.pipeline_tasks(p.id)}
        arrays = self.store.arrays_by_id(s["array_id"] for s in p.steps if s.get("array_id") is not None)
        steps: list[dict[str, Any]] = []
        counts: dict[str, int] = {}
        for r in recs.values():
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        for s in p.steps:
            out: dict[str, Any] = {"name": s.get("name"), "needs": list(s.get("needs") or []),
                                   "task_id": s.get("task_id"), "array_id": s.get("array_id")}
            if s.get("array_id") is not None and s["array_id"] in arrays:
                summ = self.array_summary(arrays[s["array_id"]])
                out["status"], out["reason"] = summ["status"], summ["reason"]
            else:
                rec = recs.get(s.get("task_id") or 0)
                out["status"] = rec.status.value if rec is not None else "unknown"
                out["reason"] = self.reason_for(rec) if rec is not None else None
            steps.append(out)
        return {"status": _aggregate(counts, len(recs)), "steps": steps}


def _ids(ids: Sequence[int]) -> str:
    """"task 12" or "tasks 12-14 (3)" for the log."""
    return f"task {ids[0]}" if len(ids) == 1 else f"tasks {ids[0]}-{ids[-1]} ({len(ids)})"


def _aggregate(counts: Mapping[str, int], size: int) -> str:
    """running if any is starting/running, else pending if any waits, else succeeded if all did, else failed if
    any failed or was lost, else cancelled."""
    if any(counts.get(s.value, 0) for s in _RUNNING):
        return "running"
    if counts.get(S.PENDING.value, 0):
        return "pending"
    if size and counts.get(S.SUCCEEDED.value, 0) == size:
        return "succeeded"
    if counts.get(S.FAILED.value, 0) or counts.get(S.LOST.value, 0):
        return "failed"
    return "cancelled"


def _cause(b: TaskBrief) -> str:
    """How an ended task is named in a dependent's reason; one cancelled for its own dependency names the first
    cause too: "task 13 (train) was cancelled, as task 12 (prepare) failed"."""
    if b.status == S.CANCELLED and (b.reason or "").startswith(DEP_PREFIX):
        root = (b.reason or "")[len(DEP_PREFIX):].rsplit(", as ", 1)[-1]
        return f"task {b.id} ({b.name}) was cancelled, as {root}"
    return f"task {b.id} ({b.name}) {b.status.value}"


def _task_state(on: int, when: str, b: TaskBrief | None) -> tuple[str, str]:
    if b is None:
        return NEVER, f"task {on} does not exist"
    if not b.status.is_terminal():
        return WAIT, f"waits for task {on} ({b.name}) to {_VERB.get(when, when)}"
    if when == "finished":
        return MET, ""
    if when == "succeeded":
        return (MET, "") if b.status == S.SUCCEEDED else (NEVER, _cause(b))
    return (MET, "") if b.status in _BAD else (NEVER, _cause(b))  # failed: afternotok


def _array_state(on: int, when: str, a: ArrayRecord | None, counts: Mapping[str, int],
                 first_bad: TaskRecord | None = None) -> tuple[str, str]:
    if a is None:
        return NEVER, f"array {on} does not exist"
    ended = sum(n for s, n in counts.items() if S(s).is_terminal())
    ok = counts.get(S.SUCCEEDED.value, 0)
    bad = ended - ok
    name = f"array {on} ({a.name})"
    if when == "all_succeeded":
        if bad:
            text = f"{name}: {bad} of {a.size} elements did not succeed"
            if first_bad is not None:
                why = first_bad.reason or ""
                if first_bad.status == S.CANCELLED and why.startswith(DEP_PREFIX):
                    text += ", as " + why[len(DEP_PREFIX):].rsplit(", as ", 1)[-1]
                else:
                    text += f" (element {first_bad.array_index}, task {first_bad.id}: {first_bad.status.value})"
            return NEVER, text
        if ok >= a.size:
            return MET, ""
        return WAIT, f"waits for {name}: all {a.size} elements to succeed ({ok} done)"
    if when == "all_finished":
        if ended >= a.size:
            return MET, ""
        return WAIT, f"waits for {name}: all {a.size} elements to finish ({ended} ended)"
    if ended:
        return MET, ""
    return WAIT, f"waits for {name}: any element to finish"
