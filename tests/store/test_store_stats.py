"""The usage queries (store/stats.py) on rows with known values, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa

from tacc_hub.store import NewTask, Store
from tacc_hub.store.models import tasks


def _task(store: Store, owner: str, gpus: int, submitted: float, started: float | None, finished: float | None,
          qos: str | None = None) -> int:
    spec = {"resources": {"gpus_per_node": gpus}, **({"qos": {"class": qos}} if qos else {})}
    (rec,) = store.insert_tasks([NewTask(owner, "t", "d" * 64, spec, {}, submitted_at=submitted, gpus=gpus)])
    with store.engine.begin() as conn:
        conn.execute(sa.update(tasks).where(tasks.c.id == rec.id).values(started_at=started, finished_at=finished))
    return rec.id


def test_runs_between_charges_what_the_quota_accounting_charges(store: Store):
    since, now = 1000.0, 2000.0
    a = _task(store, "ann", 2, 0.0, 1100.0, 1200.0)
    b = _task(store, "ann", 4, 0.0, 900.0, 1050.0)
    _task(store, "ann", 1, 0.0, 500.0, 900.0)  # before the window
    c = _task(store, "bob", 3, 0.0, 1900.0, None)  # running: up to now
    _task(store, "bob", 5, 0.0, None, None)  # never started
    _task(store, "cat", 0, 0.0, 1100.0, 1500.0)  # no GPUs
    store.record_run(c, "bob", 3, 1200.0, 1300.0)  # an earlier, preempted run
    runs = store.runs_between(since, now)
    assert sorted((r.task_id, r.owner, r.gpus, r.start, r.end) for r in runs) == sorted([
        (a, "ann", 2, 1100.0, 1200.0), (b, "ann", 4, 900.0, 1050.0), (c, "bob", 3, 1900.0, 2000.0),
        (c, "bob", 3, 1200.0, 1300.0)])
    charged: dict[str, float] = {}
    for r in runs:
        charged[r.owner] = charged.get(r.owner, 0.0) + r.gpus * (min(r.end, now) - max(r.start, since))
    assert charged == store.gpu_seconds_by_owner(since, now)
    assert {r.owner for r in store.runs_between(since, now, owner="bob")} == {"bob"}


def test_waits_between_gives_each_started_tasks_wait_and_qos_class(store: Store):
    i = _task(store, "ann", 1, 100.0, 160.0, None, qos="interactive")
    n = _task(store, "ann", 1, 100.0, 400.0, 500.0)  # no qos in the spec: normal
    low = _task(store, "bob", 0, 100.0, 1100.0, 1200.0, qos="low")
    _task(store, "bob", 1, 100.0, 50.0, 60.0)  # started before the window
    _task(store, "bob", 1, 100.0, None, None)  # still waiting: not counted (it has not started)
    waits = {w.task_id: (w.qos, w.seconds, w.owner) for w in store.waits_between(150.0, 1500.0)}
    assert waits == {i: ("interactive", 60.0, "ann"), n: ("normal", 300.0, "ann"), low: ("low", 1000.0, "bob")}


def test_sample_means_average_each_tasks_samples(store: Store):
    store.add_gpu_samples([(7, 1.0, 50.0, None, 1), (7, 2.0, 100.0, 10.0, 1), (8, 1.0, 0.0, None, 2)])
    means = store.sample_means([7, 8, 9])
    assert means[7].util == 75.0 and means[7].samples == 2
    assert means[8].util == 0.0 and means[8].samples == 1
    assert 9 not in means and store.sample_means([]) == {}
