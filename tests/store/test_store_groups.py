"""GroupStore on SQLite and PostgreSQL: arrays, pipelines and dependencies inserted in one transaction."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from tacc_hub.store import NewTask, Store, TaskStatus
from tacc_hub.store.groups import PipelineStepRows
from tacc_hub.store.models import pipelines, task_arrays, task_dependencies, tasks

S = TaskStatus


def row(owner: str = "alice", name: str = "t", index: int | None = None, big: bool = False) -> NewTask:
    plan = {"launch": "x" * 1500} if big else {"p": 1}
    return NewTask(owner=owner, name=name, digest=f"d{index}", spec={"name": name, "i": index}, plan=plan,
                   submitted_at=1000.0, array_index=index)


def count(store: Store, table: sa.Table) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_array_insert_links_every_element(store: Store) -> None:
    before = store.insert_tasks([row()])[0]
    arr, recs = store.insert_array("alice", "sweep", [row(index=i) for i in (0, 2, 4)], max_running=2,
                                   deps=[("task", before.id, "succeeded")])
    assert arr.id == recs[0].id and arr.size == 3 and arr.max_running == 2 and arr.owner == "alice"
    assert [r.array_index for r in recs] == [0, 2, 4]
    assert all(r.array_id == arr.id and r.pipeline_id is None for r in recs)
    # what was written is what was returned
    stored = store.array_tasks(arr.id)
    assert [(r.id, r.array_id, r.array_index) for r in stored] == [(r.id, arr.id, r.array_index) for r in recs]
    assert all(r.plan is None for r in stored)  # listing: no plans read
    assert store.get(recs[1].id).array_id == arr.id
    assert store.get_array(arr.id) == arr
    deps = store.dependencies(r.id for r in recs)
    assert {t: [(d.kind, d.on_id, d.when) for d in ds] for t, ds in deps.items()} == {
        r.id: [("task", before.id, "succeeded")] for r in recs}
    assert {d.task_id for d in store.dependents([before.id])} == {r.id for r in recs}
    assert store.dependencies([before.id]) == {}


def test_array_counts_filters_and_listing(store: Store) -> None:
    a, ra = store.insert_array("alice", "a", [row(index=i) for i in range(4)], max_running=None)
    b, rb = store.insert_array("bob", "b", [row("bob", index=i) for i in range(2)], max_running=1)
    store.transition(ra[0].id, S.CANCELLED, expected=S.PENDING)
    assert store.array_counts([a.id, b.id, 999999]) == {a.id: {"pending": 3, "cancelled": 1}, b.id: {"pending": 2}}
    assert [r.id for r in store.array_tasks(a.id, [S.PENDING])] == [r.id for r in ra[1:]]
    assert store.array_tasks(a.id, []) == []
    assert [x.id for x in store.list_arrays(None)] == [b.id, a.id]
    assert [x.id for x in store.list_arrays("alice")] == [a.id]
    assert [x.id for x in store.list_arrays(None, before=b.id)] == [a.id]
    assert store.list_arrays(None, limit=0) == []
    assert store.arrays_by_id([a.id, 424242]) == {a.id: a}
    briefs = store.task_briefs([rb[1].id, 424242])
    assert list(briefs) == [rb[1].id]
    assert briefs[rb[1].id].array_id == b.id and briefs[rb[1].id].status == S.PENDING


def test_array_insert_is_all_or_nothing(store: Store) -> None:
    with pytest.raises(ValueError, match="index of its own"):
        store.insert_array("alice", "a", [row(index=0), row(index=0)], max_running=None)
    with pytest.raises(ValueError, match="when"):
        store.insert_array("alice", "a", [row(index=0)], max_running=None, deps=[("task", 1, "all_succeeded")])
    with pytest.raises(ValueError, match="kind"):
        store.insert_with_deps(row(), [("job", 1, "succeeded")])
    # a failure inside the transaction (a duplicate array id) leaves no task behind
    arr, _ = store.insert_array("alice", "a", [row(index=0)], max_running=None)
    n = count(store, tasks)
    with store.engine.begin() as conn:  # make the next array's id collide
        conn.execute(sa.insert(task_arrays).values(id=arr.id + 1, owner="x", name="x", size=1, created_at=0.0))
    with pytest.raises(sa.exc.IntegrityError):
        store.insert_array("alice", "b", [row(index=i) for i in range(5)], max_running=None,
                           deps=[("task", arr.id, "finished")])
    assert count(store, tasks) == n and count(store, task_dependencies) == 0


def test_insert_with_deps(store: Store) -> None:
    a = store.insert_tasks([row()])[0]
    b = store.insert_with_deps(row(), [("task", a.id, "failed"), ("array", a.id, "any_finished")])
    assert store.get(b.id) == b
    assert [(d.kind, d.when) for d in store.dependencies([b.id])[b.id]] == [("task", "failed"),
                                                                           ("array", "any_finished")]


def test_pipeline_steps_wait_for_each_other(store: Store) -> None:
    seen: dict[str, object] = {}

    def train(done, members):
        seen.update(done)
        seen["members"] = members
        return [row(name="train")]

    p, recs = store.insert_pipeline("alice", "pipe", [
        PipelineStepRows("prepare", rows=[row(name="prepare")]),
        PipelineStepRows("sweep", needs=["prepare"], rows=[row(name="sweep", index=i) for i in range(3)], array=True,
                         max_running=2),
        PipelineStepRows("train", needs=["prepare", "sweep"], rows=train),
    ])
    prepare, sweep, trained = recs[0], recs[1:4], recs[4]
    assert p.id == prepare.id and all(r.pipeline_id == p.id for r in recs)
    assert seen == {"prepare": ("task", prepare.id), "sweep": ("array", sweep[0].id),
                    "members": {sweep[0].id: [(i, r.id) for i, r in enumerate(sweep)]}}
    assert p.steps == [{"name": "prepare", "needs": [], "task_id": prepare.id},
                       {"name": "sweep", "needs": ["prepare"], "array_id": sweep[0].id},
                       {"name": "train", "needs": ["prepare", "sweep"], "task_id": trained.id}]
    assert store.get_pipeline(p.id) == p
    assert [r.id for r in store.pipeline_tasks(p.id)] == [r.id for r in recs]
    arr = store.get_array(sweep[0].id)
    assert arr.pipeline_id == p.id and arr.step == "sweep" and arr.max_running == 2
    deps = store.dependencies(r.id for r in recs)
    assert prepare.id not in deps
    assert all([(d.kind, d.on_id, d.when) for d in deps[r.id]] == [("task", prepare.id, "succeeded")] for r in sweep)
    assert [(d.kind, d.on_id, d.when) for d in deps[trained.id]] == [("task", prepare.id, "succeeded"),
                                                                     ("array", sweep[0].id, "all_succeeded")]
    assert [x.id for x in store.list_pipelines("alice")] == [p.id] and store.list_pipelines("bob") == []


def test_pipeline_array_first_and_rollback(store: Store) -> None:
    p, recs = store.insert_pipeline("alice", "pipe", [
        PipelineStepRows("sweep", rows=[row(index=i) for i in range(2)], array=True),
        PipelineStepRows("eval", needs=["sweep"], rows=[row(name="eval")]),
    ])
    assert p.id == recs[0].id == recs[0].array_id and recs[0].pipeline_id == p.id
    assert store.get(recs[0].id).pipeline_id == p.id and store.get(recs[0].id).array_id == p.id
    n = count(store, tasks)

    def boom(done, members):
        raise RuntimeError("compile failed")

    with pytest.raises(RuntimeError):
        store.insert_pipeline("alice", "pipe", [PipelineStepRows("a", rows=[row()]),
                                                PipelineStepRows("b", needs=["a"], rows=boom)])
    with pytest.raises(ValueError, match="not an earlier step"):
        store.insert_pipeline("alice", "pipe", [PipelineStepRows("a", needs=["b"], rows=[row()])])
    assert count(store, tasks) == n and count(store, pipelines) == 1 and count(store, task_arrays) == 1


def test_thousand_element_array_is_fast(store: Store) -> None:
    """As fast as the same rows inserted as plain tasks (the disk's cost), and within 0.2 s on SQLite (~0.14 s
    here with 2 kB plans; the limit leaves room for a busy machine's fsync)."""
    rows = [row(index=i, big=True) for i in range(1000)]
    store.insert_array("alice", "warm", rows[:2], max_running=None)
    best = plain = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        arr, recs = store.insert_array("alice", "big", rows, max_running=10)
        best = min(best, time.perf_counter() - t)
        t = time.perf_counter()
        store.insert_tasks(rows)
        plain = min(plain, time.perf_counter() - t)
    assert len(recs) == 1000 and len(store.array_tasks(arr.id)) == 1000
    assert len({r.id for r in recs}) == 1000
    assert best < 2 * plain + 0.05, f"array {best * 1000:.0f} ms, the same rows as tasks {plain * 1000:.0f} ms"
    if store.dialect == "sqlite":
        assert best < 0.2, f"1,000-element insert took {best * 1000:.0f} ms"


def test_cancel_pending_is_guarded(store: Store) -> None:
    arr, recs = store.insert_array("alice", "a", [row(index=i) for i in range(4)], max_running=None)
    store.transition(recs[1].id, S.STARTING, expected=S.PENDING)
    gone = store.cancel_pending([r.id for r in recs] + [424242], reason="cancelled before it started", at=5.0)
    assert gone == [recs[0].id, recs[2].id, recs[3].id]
    got = store.get(recs[2].id)
    assert got.status == S.CANCELLED and got.finished_at == 5.0 and got.reason == "cancelled before it started"
    assert store.get(recs[1].id).status == S.STARTING
    assert store.cancel_pending([recs[0].id], reason="again", at=6.0) == []
    assert store.get(recs[0].id).reason == "cancelled before it started"
    assert store.cancel_pending([], reason="x", at=1.0) == []
    assert [r.id for r in store.array_tasks(arr.id, [S.CANCELLED], limit=1)] == [recs[0].id]


def test_group_briefs(store: Store) -> None:
    p, recs = store.insert_pipeline("alice", "pipe", [
        PipelineStepRows("a", rows=[row(name="a")]),
        PipelineStepRows("b", needs=["a"], rows=[row(name="b", index=i) for i in range(3)], array=True)])
    store.transition(recs[2].id, S.CANCELLED, expected=S.PENDING)
    assert [b.id for b in store.group_briefs(pipeline_id=p.id)] == [r.id for r in recs]
    arr = recs[1].array_id
    briefs = store.group_briefs(array_id=arr, states=[S.PENDING])
    assert [(b.id, b.array_index, b.status) for b in briefs] == [(recs[1].id, 0, S.PENDING), (recs[3].id, 2, S.PENDING)]
    assert store.group_briefs(array_id=arr, states=[]) == []
    with pytest.raises(ValueError):
        store.group_briefs()


def test_lookups_of_ids_that_do_not_exist(store: Store) -> None:
    huge = 2**62
    assert store.task_briefs([huge, 1]) == {}
    assert store.arrays_by_id([huge]) == {} and store.get_array(huge) is None and store.get_pipeline(huge) is None
    assert store.dependencies([huge]) == {} and store.dependents([huge]) == []
    assert store.array_counts([huge]) == {} and store.array_tasks(huge) == []
    assert store.cancel_pending([huge], reason="x", at=1.0) == []
