"""Quotas, memberships and GPU-second accounting in the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tacc_hub.scheduler.policy import Limits, Quotas
from tacc_hub.store import NewTask, QuotaError, Store, tasks


def test_quota_crud_round_trips_and_upserts(store: Store):
    assert store.list_quotas() == [] and store.get_quota("user", "alice") is None
    row = store.set_quota("user", "alice", max_gpus=8, guaranteed_gpus=2, gpu_hours=100.5)
    assert (row.kind, row.name, row.max_gpus, row.guaranteed_gpus, row.gpu_hours) == ("user", "alice", 8, 2, 100.5)
    assert store.get_quota("user", "alice") == row
    # An upsert replaces every value: a limit left out is cleared.
    store.set_quota("user", "alice", max_gpus=None, gpu_hours=None)
    again = store.get_quota("user", "alice")
    assert again is not None and (again.max_gpus, again.guaranteed_gpus, again.gpu_hours) == (None, 0, None)
    store.set_quota("group", "lab-a", max_gpus=16, guaranteed_gpus=4, gpu_hours=None)
    store.set_quota("group", "*", max_gpus=4, guaranteed_gpus=0, gpu_hours=10)
    store.set_quota("user", "*", max_gpus=2, guaranteed_gpus=0, gpu_hours=None)
    # users first, then groups; "*" first within a kind
    assert [(r.kind, r.name) for r in store.list_quotas()] == [
        ("user", "*"), ("user", "alice"), ("group", "*"), ("group", "lab-a")]
    assert store.get_quota("user", "lab-a") is None  # kinds are separate namespaces
    assert store.delete_quota("group", "lab-a") is True
    assert store.delete_quota("group", "lab-a") is False
    assert store.get_quota("group", "lab-a") is None


def test_load_quotas_applies_defaults(store: Store):
    assert store.load_quotas() == Quotas()
    store.set_quota("user", "alice", max_gpus=8, guaranteed_gpus=0, gpu_hours=None)
    store.set_quota("user", "*", max_gpus=2, guaranteed_gpus=1, gpu_hours=5.0)
    store.set_quota("group", "lab-a", max_gpus=None, guaranteed_gpus=4, gpu_hours=1000.0)
    q = store.load_quotas()
    assert q.users == {"alice": Limits(max_gpus=8)}
    assert q.groups == {"lab-a": Limits(guaranteed_gpus=4, gpu_hours=1000.0)}
    assert q.default_user == Limits(max_gpus=2, guaranteed_gpus=1, gpu_hours=5.0)
    assert q.default_group == Limits()
    assert q.exhausted == frozenset()
    assert q.user("bob") == q.default_user and q.user("alice").max_gpus == 8
    assert q.group("lab-b") == Limits() and q.group("lab-a").guaranteed_gpus == 4


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"max_gpus": -1}, "max_gpus"),
    ({"max_gpus": 1.5}, "max_gpus"),
    ({"max_gpus": True}, "max_gpus"),
    ({"guaranteed_gpus": -2}, "guaranteed_gpus"),
    ({"guaranteed_gpus": None}, "guaranteed_gpus"),
    ({"gpu_hours": -0.5}, "gpu_hours"),
    ({"gpu_hours": float("nan")}, "gpu_hours"),
    ({"gpu_hours": float("inf")}, "gpu_hours"),
    ({"gpu_hours": "10"}, "gpu_hours"),
    ({"max_gpus": 2, "guaranteed_gpus": 3}, "guaranteed_gpus"),
])
def test_set_quota_refuses_bad_numbers(store: Store, kwargs: dict, field: str):
    values = {"max_gpus": None, "guaranteed_gpus": 0, "gpu_hours": None, **kwargs}
    with pytest.raises(QuotaError) as err:
        store.set_quota("user", "alice", **values)
    assert err.value.field == field
    assert store.list_quotas() == []


@pytest.mark.parametrize("name", ["", "a b", "../etc", "x" * 65, "-lead", "a;drop table quotas", "é", "a\nb",
                                  "a/b", "**"])
def test_set_quota_refuses_hostile_names(store: Store, name: str):
    with pytest.raises(QuotaError) as err:
        store.set_quota("group", name, max_gpus=1, guaranteed_gpus=0, gpu_hours=None)
    assert err.value.field == "name"
    with pytest.raises(QuotaError):
        store.set_group(name if name else "", "lab-a")
    assert store.list_quotas() == [] and store.memberships() == {}


def test_names_and_kinds_checked(store: Store):
    with pytest.raises(QuotaError, match="kind"):
        store.set_quota("team", "x", max_gpus=None, gpu_hours=None)
    with pytest.raises(QuotaError, match="name"):
        store.set_quota("group", "a@b", max_gpus=None, gpu_hours=None)  # '@' only in user names
    store.set_quota("user", "ann@uni.edu", max_gpus=1, gpu_hours=None)
    assert store.get_quota("user", "ann@uni.edu") is not None
    with pytest.raises(QuotaError, match="group"):
        store.set_group("ann", "*")


def test_memberships(store: Store):
    assert store.group_of("alice") == "default" and store.memberships() == {}
    store.set_group("alice", "lab-a")
    store.set_group("bob", "lab-a")
    store.set_group("alice", "lab-b")  # moves, never two rows
    assert store.group_of("alice") == "lab-b"
    assert store.memberships() == {"alice": "lab-b", "bob": "lab-a"}
    store.set_group("bob", None)
    store.set_group("alice", "default")
    assert store.memberships() == {} and store.group_of("bob") == "default"
    store.set_group("nobody", None)  # clearing a user without a row is fine


def _task(store: Store, owner: str, gpus: int, started: float | None, finished: float | None) -> int:
    (rec,) = store.insert_tasks([NewTask(owner, "t", "d" * 64, {}, {}, submitted_at=0.0, gpus=gpus)])
    with store.engine.begin() as conn:
        conn.execute(sa.update(tasks).where(tasks.c.id == rec.id).values(started_at=started, finished_at=finished))
    return rec.id


def test_gpus_column_is_written_by_both_insert_paths(store: Store):
    one = store.insert_tasks([NewTask("a", "t", "d" * 64, {}, {}, submitted_at=0.0, gpus=3)])
    many = store.insert_tasks([NewTask("a", "t", "d" * 64, {}, {}, submitted_at=0.0, gpus=g) for g in (0, 1, 8)])
    ids = [r.id for r in one + many]
    with store.engine.connect() as conn:
        got = dict(conn.execute(sa.select(tasks.c.id, tasks.c.gpus).where(tasks.c.id.in_(ids))).all())
    assert [got[i] for i in ids] == [3, 0, 1, 8]
    with pytest.raises(ValueError, match="gpus"):
        NewTask("a", "t", "d" * 64, {}, {}, submitted_at=0.0, gpus=-1)


def test_gpu_seconds_by_owner(store: Store):
    since, now = 1000.0, 2000.0
    _task(store, "ann", 2, 1100.0, 1200.0)  # inside: 2 x 100
    _task(store, "ann", 4, 900.0, 1050.0)  # spans the period start: 4 x 50
    _task(store, "ann", 1, 500.0, 900.0)  # ended before the period: nothing
    _task(store, "ann", 1, 500.0, 1000.0)  # ended exactly at the start: nothing
    _task(store, "bob", 3, 1900.0, None)  # running: 3 x 100 (up to now)
    _task(store, "bob", 2, 800.0, None)  # running since before the period: 2 x 1000
    _task(store, "bob", 5, None, None)  # never started: nothing
    _task(store, "cat", 0, 1100.0, 1500.0)  # no GPUs: nothing, and cat is absent
    _task(store, "dan", 1, 1500.0, 2500.0)  # finished "after now" (clock skew): counted up to now
    _task(store, "eve", 8, 2100.0, None)  # starts after now: nothing
    usage = store.gpu_seconds_by_owner(since, now)
    assert usage == pytest.approx({"ann": 200.0 + 200.0, "bob": 300.0 + 2000.0, "dan": 500.0})
    assert set(usage) == {"ann", "bob", "dan"}
    assert all(isinstance(v, float) for v in usage.values())
    # A later window sees less of the same tasks.
    assert store.gpu_seconds_by_owner(1150.0, 1200.0) == pytest.approx({"ann": 100.0, "bob": 100.0})
    assert store.gpu_seconds_by_owner(3000.0, 2000.0) == {}


def test_preempted_runs_are_charged_too(store: Store):
    _task(store, "ann", 2, 1500.0, None)  # the current run of a task preempted before
    store.record_run(1, "ann", 2, 1100.0, 1300.0)  # its earlier run: 2 x 200
    store.record_run(1, "ann", 2, 800.0, 1100.0)  # an even earlier one, partly before the period: 2 x 100
    store.record_run(1, "ann", 0, 1100.0, 1300.0)  # no GPUs: not kept
    store.record_run(1, "ann", 2, 1300.0, 1300.0)  # empty: not kept
    assert store.gpu_seconds_by_owner(1000.0, 2000.0) == pytest.approx({"ann": 2 * 500.0 + 400.0 + 200.0})


def test_new_task_takes_gpus_from_the_spec_when_not_given():
    def nt(spec: dict, gpus: int = 0) -> NewTask:
        return NewTask("a", "t", "d" * 64, spec, {}, submitted_at=0.0, gpus=gpus)

    assert nt({"resources": {"nodes": 2, "gpus_per_node": 4}}).gpus == 8
    assert nt({"resources": {"gpus_per_node": 2}}).gpus == 2  # nodes defaults to 1
    assert nt({"resources": {"nodes": 2, "gpus_per_node": 4}}, gpus=3).gpus == 3  # explicit wins
    assert nt({"resources": {"nodes": [1, 2], "gpus_per_node": 4}}).gpus == 0  # not a spec we wrote
    assert nt({"resources": {"nodes": 2, "gpus_per_node": True}}).gpus == 0
    assert nt({}).gpus == 0
