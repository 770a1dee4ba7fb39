"""What the store keeps about many tasks at once (issue 20): arrays, pipelines, dependencies.

:class:`GroupStore` is a mixin of :class:`~tacc_hub.store.store.Store` (it uses the store's engine
and clock).

Invariants:

* An array, its elements (``tasks`` rows with ``array_id``/``array_index``) and their dependency rows
  are inserted in one transaction: an array is never half there. So is a pipeline with all its steps.
* ``task_arrays.id`` is its first element's task id and ``pipelines.id`` its first task's id: one id
  space with tasks, as Slurm's array job id (``tcloud cancel 12`` names the array whose first element is 12).
  The first row is inserted alone, its id read back and written into the row itself and into every
  later row of the same transaction (no guess of the next id, on either database).
* ``task_dependencies`` rows are only added; a dependency names a task or array that existed, of the
  same owner, when the waiting task was inserted, so no cycle can be written. (That the named task
  exists and is the owner's is the caller's check, made before it inserts; the store only checks the
  shape of each dependency: its kind and its ``when``.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from .models import NAME_LEN, pipelines, task_arrays, task_dependencies, tasks
from .records import NewTask, TaskRecord
from .status import TaskStatus, check_move

TASK_WHENS = ("succeeded", "finished", "failed")
ARRAY_WHENS = ("all_succeeded", "all_finished", "any_finished")
WHENS: dict[str, tuple[str, ...]] = {"task": TASK_WHENS, "array": ARRAY_WHENS}

Dep = tuple[str, int, str]
"""A dependency to insert: (kind "task" | "array", the id waited on, when)."""


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


@dataclass(frozen=True, slots=True)
class TaskBrief:
    """What dependency checks need of a task: no spec, no plan (cheap to read many)."""

    id: int
    owner: str
    name: str
    status: TaskStatus
    reason: str | None
    array_id: int | None
    array_index: int | None


StepRef = tuple[str, int]
"""A pipeline step once inserted: ("task", its task id) or ("array", its array id)."""
Members = Mapping[int, list[tuple[int, int]]]
"""The arrays inserted so far in a pipeline: array id -> [(index, task id)], in index order."""


@dataclass(frozen=True)
class PipelineStepRows:
    """One step of a pipeline to insert.

    ``rows``: the step's task (one row) or its array's elements (``array=True``; ``array_index`` set
    on each), or a function that builds them from the steps inserted before it (``done``: name ->
    ``StepRef``; ``members``: the elements of the arrays among them), called inside the pipeline's
    transaction (so a step's spec and plan may name the ids of earlier steps: its resolved ``inputs``);
    an exception it raises rolls the whole pipeline back. ``needs`` (names of
    earlier steps) become dependencies: on a task step ``succeeded``, on an array step
    ``all_succeeded``; ``deps`` are the step's own ``depends_on``, already resolved.
    """

    name: str
    needs: Sequence[str] = ()
    rows: Sequence[NewTask] | Callable[[Mapping[str, StepRef], Members], Sequence[NewTask]] = ()
    array: bool = False
    max_running: int | None = None
    deps: Sequence[Dep] = field(default_factory=tuple)


_PG_MAX_ID = 2**31 - 1  # PostgreSQL INTEGER
_SQLITE_MAX_ID = 2**63 - 1
_BRIEF_COLUMNS = (tasks.c.id, tasks.c.owner, tasks.c.name, tasks.c.status, tasks.c.reason, tasks.c.array_id,
                  tasks.c.array_index)
_NO_PLAN = tuple(c for c in tasks.c if c.key != "plan")


def _check_deps(deps: Iterable[Dep]) -> list[Dep]:
    out: list[Dep] = []
    for d in deps:
        kind, on_id, when = d
        if kind not in WHENS:
            raise ValueError(f"dependency kind: task or array, not {kind!r}")
        if when not in WHENS[kind]:
            raise ValueError(f"a {kind} dependency's when is one of {', '.join(WHENS[kind])}, not {when!r}")
        if type(on_id) is not int or on_id < 1:
            raise ValueError("dependency id: a whole number >= 1")
        out.append((kind, on_id, when))
    return out


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not name or len(name) > NAME_LEN:
        raise ValueError(f"{what}: a non-empty string of at most {NAME_LEN} characters")


def _array(row: Any) -> ArrayRecord:
    return ArrayRecord(id=int(row.id), owner=row.owner, name=row.name, size=int(row.size),
                       max_running=row.max_running, pipeline_id=row.pipeline_id, step=row.step,
                       created_at=float(row.created_at))


def _pipeline(row: Any) -> PipelineRecord:
    return PipelineRecord(id=int(row.id), owner=row.owner, name=row.name, steps=json.loads(row.steps),
                          created_at=float(row.created_at))


class GroupStore:
    """Arrays, pipelines and dependencies (see the module docstring)."""

    _engine: sa.Engine
    _clock: Callable[[], float]
    # what the store provides (store.py)
    _task_params: Callable[[Sequence[NewTask], float], list[dict[str, Any]]]
    _insert_task_params: Callable[[sa.Connection, list[dict[str, Any]]], list[int]]
    _new_record: Callable[[int, NewTask, Mapping[str, Any]], TaskRecord]

    def _ids(self, ids: Iterable[int]) -> list[int]:
        """Distinct ids, sorted, without those no row can have (below 1, or over the id column's range: a
        PostgreSQL INTEGER refuses a larger value outright, so asking for one would be an error, not a miss)."""
        top = _PG_MAX_ID if self._engine.dialect.name == "postgresql" else _SQLITE_MAX_ID
        return sorted({i for i in (int(x) for x in ids) if 0 < i <= top})

    # -- inserts -----------------------------------------------------------------------

    def _insert_linked(self, conn: sa.Connection, rows: Sequence[NewTask], now: float, *, array: bool,
                       pipeline_id: int | None, new_pipeline: bool) -> tuple[list[dict[str, Any]], list[int]]:
        """Insert ``rows`` in the caller's transaction; with ``array`` they share the first one's id as array id;
        with ``new_pipeline`` the first id is also the pipeline's. Returns (encoded rows, ids)."""
        params = self._task_params(rows, now)
        first = self._insert_task_params(conn, params[:1])[0]
        fix: dict[str, Any] = {}
        if array:
            fix["array_id"] = first
        if new_pipeline:
            pipeline_id = first
        if pipeline_id is not None:
            fix["pipeline_id"] = pipeline_id
        if fix:
            conn.execute(sa.update(tasks).where(tasks.c.id == first).values(fix))
            for p in params:
                p.update(fix)
        ids = [first, *self._insert_task_params(conn, params[1:])]
        return params, ids

    @staticmethod
    def _insert_deps(conn: sa.Connection, ids: Sequence[int], deps: Sequence[Dep]) -> None:
        if deps and ids:
            conn.execute(sa.insert(task_dependencies), [
                {"task_id": t, "kind": k, "on_id": on, "when": w} for t in ids for k, on, w in deps])

    def insert_array(self, owner: str, name: str, rows: Sequence[NewTask], *, max_running: int | None,
                     pipeline_id: int | None = None, step: str | None = None,
                     deps: Iterable[Dep] = ()) -> tuple[ArrayRecord, list[TaskRecord]]:
        """Insert an array (its elements ``rows``, each with ``array_index``; ``deps`` for every element) in one
        transaction; the array's id is its first element's."""
        arr, recs, _ = self._array_in(None, owner, name, rows, max_running=max_running, pipeline_id=pipeline_id,
                                      step=step, deps=_check_deps(deps), now=self._clock())
        return arr, recs

    def _array_in(self, conn: sa.Connection | None, owner: str, name: str, rows: Sequence[NewTask], *,
                  max_running: int | None, pipeline_id: int | None, step: str | None, deps: Sequence[Dep],
                  now: float, new_pipeline: bool = False) -> tuple[ArrayRecord, list[TaskRecord], int | None]:
        _check_name(owner, "owner")
        _check_name(name, "name")
        if not rows:
            raise ValueError("an array has at least one element")
        if max_running is not None and (type(max_running) is not int or max_running < 1):
            raise ValueError("max_running: a whole number >= 1, or None")
        if any(r.array_index is None for r in rows) or len({r.array_index for r in rows}) != len(rows):
            raise ValueError("every element of an array has an index of its own (NewTask.array_index)")
        if conn is None:
            with self._engine.begin() as c:
                return self._array_in(c, owner, name, rows, max_running=max_running, pipeline_id=pipeline_id,
                                      step=step, deps=deps, now=now, new_pipeline=new_pipeline)
        params, ids = self._insert_linked(conn, rows, now, array=True, pipeline_id=pipeline_id,
                                          new_pipeline=new_pipeline)
        if new_pipeline:
            pipeline_id = ids[0]
        conn.execute(sa.insert(task_arrays).values(id=ids[0], owner=owner, name=name, size=len(rows),
                                                   max_running=max_running, pipeline_id=pipeline_id, step=step,
                                                   created_at=now))
        self._insert_deps(conn, ids, deps)
        arr = ArrayRecord(id=ids[0], owner=owner, name=name, size=len(rows), max_running=max_running,
                          pipeline_id=pipeline_id, step=step, created_at=now)
        recs = [self._new_record(t, r, p) for t, r, p in zip(ids, rows, params, strict=True)]
        return arr, recs, pipeline_id

    def insert_with_deps(self, row: NewTask, deps: Iterable[Dep]) -> TaskRecord:
        """Insert one task and what it waits for, in one transaction."""
        checked = _check_deps(deps)
        now = self._clock()
        params = self._task_params([row], now)
        with self._engine.begin() as conn:
            ids = self._insert_task_params(conn, params)
            self._insert_deps(conn, ids, checked)
        return self._new_record(ids[0], row, params[0])

    def insert_pipeline(self, owner: str, name: str,
                        steps: Sequence[PipelineStepRows]) -> tuple[PipelineRecord, list[TaskRecord]]:
        """Insert a pipeline, every step's tasks and dependencies, in one transaction (see PipelineStepRows).
        The pipeline's id is its first step's first task id; the records come in step order."""
        _check_name(owner, "owner")
        _check_name(name, "name")
        if not steps:
            raise ValueError("a pipeline has at least one step")
        names = [s.name for s in steps]
        if len(set(names)) != len(names):
            raise ValueError("pipeline steps have names of their own")
        now = self._clock()
        done: dict[str, StepRef] = {}
        members: dict[int, list[tuple[int, int]]] = {}
        out: list[TaskRecord] = []
        listed: list[dict[str, Any]] = []
        pid: int | None = None
        with self._engine.begin() as conn:
            for st in steps:
                _check_name(st.name, "step name")
                unknown = [n for n in st.needs if n not in done]
                if unknown:
                    raise ValueError(f"step {st.name} needs {', '.join(unknown)}, not an earlier step")
                deps = [("array", done[n][1], "all_succeeded") if done[n][0] == "array"
                        else ("task", done[n][1], "succeeded") for n in st.needs]
                deps = _check_deps([*deps, *st.deps])
                rows = list(st.rows(dict(done), members) if callable(st.rows) else st.rows)
                if not rows:
                    raise ValueError(f"step {st.name} has no task")
                entry: dict[str, Any] = {"name": st.name, "needs": list(st.needs)}
                if st.array:
                    arr, recs, pid = self._array_in(conn, owner, rows[0].name, rows, max_running=st.max_running,
                                                    pipeline_id=pid, step=st.name, deps=deps, now=now,
                                                    new_pipeline=pid is None)
                    done[st.name] = ("array", arr.id)
                    members[arr.id] = sorted((int(r.array_index or 0), r.id) for r in recs)
                    entry["array_id"] = arr.id
                else:
                    if len(rows) != 1:
                        raise ValueError(f"step {st.name}: a task step has one task (or make it an array)")
                    params, ids = self._insert_linked(conn, rows, now, array=False, pipeline_id=pid,
                                                      new_pipeline=pid is None)
                    pid = ids[0] if pid is None else pid
                    self._insert_deps(conn, ids, deps)
                    recs = [self._new_record(ids[0], rows[0], params[0])]
                    done[st.name] = ("task", ids[0])
                    entry["task_id"] = ids[0]
                listed.append(entry)
                out.extend(recs)
            assert pid is not None
            conn.execute(sa.insert(pipelines).values(id=pid, owner=owner, name=name, steps=json.dumps(listed),
                                                     created_at=now))
        return PipelineRecord(id=pid, owner=owner, name=name, steps=listed, created_at=now), out

    # -- arrays ------------------------------------------------------------------------

    def get_array(self, array_id: int) -> ArrayRecord | None:
        if not self._ids([array_id]):
            return None
        with self._engine.connect() as conn:
            row = conn.execute(sa.select(task_arrays).where(task_arrays.c.id == int(array_id))).first()
        return None if row is None else _array(row)

    def arrays_by_id(self, ids: Iterable[int]) -> dict[int, ArrayRecord]:
        """The arrays with these ids (missing ones left out)."""
        want = self._ids(ids)
        if not want:
            return {}
        with self._engine.connect() as conn:
            rows = conn.execute(sa.select(task_arrays).where(task_arrays.c.id.in_(want))).all()
        return {int(r.id): _array(r) for r in rows}

    def list_arrays(self, owner: str | None, limit: int = 50, before: int | None = None) -> list[ArrayRecord]:
        """Arrays, newest first (``owner`` None: everyone's); ``before``: the last id of the previous page."""
        return [_array(r) for r in self._newest(task_arrays, owner, limit, before)]

    def _newest(self, table: sa.Table, owner: str | None, limit: int, before: int | None) -> list[Any]:
        """Rows of ``table`` (arrays or pipelines), newest first: one page of a keyset-paginated list."""
        if limit < 0:
            raise ValueError("limit: must not be negative")
        stmt = sa.select(table)
        if owner is not None:
            stmt = stmt.where(table.c.owner == owner)
        if before is not None:
            stmt = stmt.where(table.c.id < int(before))
        with self._engine.connect() as conn:
            return list(conn.execute(stmt.order_by(table.c.id.desc()).limit(limit)).all()) if limit else []

    def array_tasks(self, array_id: int, states: Collection[TaskStatus] | None = None, *,
                    limit: int | None = None) -> list[TaskRecord]:
        """An array's elements in index order (without their plans), optionally only those in ``states``, at most
        ``limit`` of them."""
        from .store import _record

        if not self._ids([array_id]):
            return []
        stmt = sa.select(*_NO_PLAN).where(tasks.c.array_id == int(array_id))
        if states is not None:
            values = sorted({TaskStatus(s).value for s in states})
            if not values:
                return []
            stmt = stmt.where(tasks.c.status.in_(values))
        with self._engine.connect() as conn:
            stmt = stmt.order_by(tasks.c.array_index)
            if limit is not None:
                stmt = stmt.limit(max(0, int(limit)))
            return [_record(r) for r in conn.execute(stmt).mappings()]

    def array_counts(self, ids: Iterable[int]) -> dict[int, dict[str, int]]:
        """How many elements of each array are in each status (status value -> count; absent statuses left out)."""
        want = self._ids(ids)
        if not want:
            return {}
        out: dict[int, dict[str, int]] = {i: {} for i in want}
        stmt = (sa.select(tasks.c.array_id, tasks.c.status, sa.func.count()).where(tasks.c.array_id.in_(want))
                .group_by(tasks.c.array_id, tasks.c.status))
        with self._engine.connect() as conn:
            for aid, status, n in conn.execute(stmt):
                out[int(aid)][str(status)] = int(n)
        return {k: v for k, v in out.items() if v}

    # -- pipelines ---------------------------------------------------------------------

    def get_pipeline(self, pipeline_id: int) -> PipelineRecord | None:
        if not self._ids([pipeline_id]):
            return None
        with self._engine.connect() as conn:
            row = conn.execute(sa.select(pipelines).where(pipelines.c.id == int(pipeline_id))).first()
        return None if row is None else _pipeline(row)

    def list_pipelines(self, owner: str | None, limit: int = 50, before: int | None = None) -> list[PipelineRecord]:
        """Pipelines, newest first (``owner`` None: everyone's); ``before``: the last id of the previous page."""
        return [_pipeline(r) for r in self._newest(pipelines, owner, limit, before)]

    def pipeline_tasks(self, pipeline_id: int) -> list[TaskRecord]:
        """Every task of a pipeline (array elements included), in id order, without their plans."""
        from .store import _record

        if not self._ids([pipeline_id]):
            return []
        stmt = sa.select(*_NO_PLAN).where(tasks.c.pipeline_id == int(pipeline_id)).order_by(tasks.c.id)
        with self._engine.connect() as conn:
            return [_record(r) for r in conn.execute(stmt).mappings()]

    # -- dependencies ------------------------------------------------------------------

    def dependencies(self, task_ids: Iterable[int]) -> dict[int, list[DependencyRecord]]:
        """What each of these tasks waits for (tasks without dependencies left out), in insertion order."""
        want = self._ids(task_ids)
        out: dict[int, list[DependencyRecord]] = {}
        if not want:
            return out
        d = task_dependencies.c
        with self._engine.connect() as conn:
            for chunk in _chunks(want):
                stmt = sa.select(d.task_id, d.kind, d.on_id, d.when).where(d.task_id.in_(chunk)).order_by(d.id)
                for t, k, on, w in conn.execute(stmt):
                    out.setdefault(int(t), []).append(DependencyRecord(int(t), k, int(on), w))
        return out

    def dependents(self, on_ids: Iterable[int]) -> list[DependencyRecord]:
        """The dependencies naming any of these ids (tasks and arrays share the id space: filter on ``kind``)."""
        want = self._ids(on_ids)
        if not want:
            return []
        d = task_dependencies.c
        out: list[DependencyRecord] = []
        with self._engine.connect() as conn:
            for chunk in _chunks(want):
                stmt = sa.select(d.task_id, d.kind, d.on_id, d.when).where(d.on_id.in_(chunk)).order_by(d.id)
                out.extend(DependencyRecord(int(t), k, int(on), w) for t, k, on, w in conn.execute(stmt))
        return out

    def cancel_pending(self, ids: Iterable[int], *, reason: str, at: float) -> list[int]:
        """Move those of these tasks that are still PENDING to CANCELLED (guarded, one transaction); their ids."""
        check_move(None, TaskStatus.PENDING, TaskStatus.CANCELLED)
        want = self._ids(ids)
        out: list[int] = []
        if not want:
            return out
        values = {"status": TaskStatus.CANCELLED.value, "finished_at": float(at), "reason": str(reason),
                  "updated_at": self._clock()}
        with self._engine.begin() as conn:
            for chunk in _chunks(want):
                stmt = (sa.update(tasks).where(tasks.c.id.in_(chunk), tasks.c.status == TaskStatus.PENDING.value)
                        .values(values).returning(tasks.c.id))
                out.extend(int(r[0]) for r in conn.execute(stmt))
        return sorted(out)

    def group_briefs(self, *, array_id: int | None = None, pipeline_id: int | None = None,
                     states: Collection[TaskStatus] | None = None) -> list[TaskBrief]:
        """The tasks of an array (or a pipeline), in id order, as briefs (no spec or plan decoded: cheap for 10,000),
        optionally only those in ``states``."""
        if (array_id is None) == (pipeline_id is None):
            raise ValueError("give exactly one of array_id or pipeline_id")
        if not self._ids([array_id if array_id is not None else pipeline_id or 0]):
            return []
        stmt = sa.select(*_BRIEF_COLUMNS)
        stmt = stmt.where(tasks.c.array_id == int(array_id)) if array_id is not None else \
            stmt.where(tasks.c.pipeline_id == int(pipeline_id or 0))
        if states is not None:
            values = sorted({TaskStatus(s).value for s in states})
            if not values:
                return []
            stmt = stmt.where(tasks.c.status.in_(values))
        with self._engine.connect() as conn:
            return [TaskBrief(int(r.id), r.owner, r.name, TaskStatus(r.status), r.reason, r.array_id, r.array_index)
                    for r in conn.execute(stmt.order_by(tasks.c.id))]

    def task_briefs(self, ids: Iterable[int]) -> dict[int, TaskBrief]:
        """Status, name, owner and array of each of these tasks (missing ones left out)."""
        want = self._ids(ids)
        out: dict[int, TaskBrief] = {}
        with self._engine.connect() as conn:
            for chunk in _chunks(want):
                for r in conn.execute(sa.select(*_BRIEF_COLUMNS).where(tasks.c.id.in_(chunk))):
                    out[int(r.id)] = TaskBrief(int(r.id), r.owner, r.name, TaskStatus(r.status), r.reason,
                                               r.array_id, r.array_index)
        return out


def _chunks(ids: list[int], n: int = 500) -> Iterable[list[int]]:
    """Id lists short enough for any driver's parameter limit."""
    for i in range(0, len(ids), n):
        yield ids[i:i + n]
