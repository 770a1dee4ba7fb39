"""Usage arithmetic (service/stats.py) on runs with known values, and ``tacc-hub usage`` on a real store."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tacc_hub.cli.admin import cli
from tacc_hub.service.stats import day_starts, per_day, percentile, top_users, usage_rows, utilization, wait_percentiles
from tacc_hub.store import NewTask, Store
from tacc_hub.store.models import tasks
from tacc_hub.store.stats import Run, Wait

H = 3600.0
DAY = 86400.0
T0 = datetime(2026, 11, 1, tzinfo=UTC).timestamp()  # a UTC midnight


def test_percentiles_interpolate_between_ranks():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    xs = [float(v) for v in range(1, 11)]  # 1..10
    assert percentile(xs, 50) == 5.5 and percentile(xs, 0) == 1.0 and percentile(xs, 100) == 10.0
    assert percentile(xs, 90) == pytest.approx(9.1) and percentile(xs, 99) == pytest.approx(9.91)
    assert percentile(list(reversed(xs)), 50) == 5.5  # order does not matter


def test_wait_percentiles_per_qos_class_list_every_class():
    waits = [Wait(i, "a", "interactive", float(s)) for i, s in enumerate([10, 20, 30])] + [Wait(9, "b", "low", 600.0)]
    got = wait_percentiles(waits)
    assert list(got) == ["interactive", "normal", "low"]
    assert got["interactive"] == {"count": 3, "p50": 20.0, "p90": 28.0, "p99": pytest.approx(29.8)}
    assert got["normal"] == {"count": 0, "p50": None, "p90": None, "p99": None}
    assert got["low"]["p99"] == 600.0


def test_per_day_splits_runs_at_utc_midnight_and_counts_tasks_once_a_day():
    starts = [T0, T0 + DAY, T0 + 2 * DAY]
    now = T0 + 2 * DAY + 6 * H  # the third day is today, up to 06:00
    runs = [Run(1, "ann", 2, T0 + 22 * H, T0 + DAY + 3 * H),  # 2 h on day 0, 3 h on day 1, x2 GPUs
            Run(2, "ann", 1, T0 - DAY, T0 + H),  # began before the window: 1 h on day 0
            Run(3, "bob", 4, T0 + 2 * DAY + 5 * H, now),  # running: 1 h today x4
            Run(3, "bob", 4, T0 + 5 * H, T0 + 6 * H)]  # its earlier run, 1 h x4 on day 0
    s = per_day(runs, starts, now)
    assert s.hours == {"ann": [5.0, 6.0, 0.0], "bob": [4.0, 0.0, 4.0]}
    assert s.tasks == {"ann": [2, 1, 0], "bob": [1, 0, 1]}
    total = sum(sum(v) for v in s.hours.values())
    assert total == pytest.approx(sum(r.gpus * (min(r.end, now) - max(r.start, T0)) for r in runs) / H)
    groups = per_day(runs, starts, now, lambda r: {"ann": "lab"}.get(r.owner, "default"))
    assert groups.hours == {"lab": [5.0, 6.0, 0.0], "default": [4.0, 0.0, 4.0]}
    assert day_starts(T0 + 2 * DAY + 5, 3) == starts


def test_utilization_is_the_mean_allocation_per_bucket_over_capacity():
    runs = [Run(1, "a", 2, T0, T0 + 1.5 * H), Run(2, "b", 4, T0 + 0.5 * H, T0 + 3 * H)]
    starts, allocated, fraction = utilization(runs, T0, T0 + 2.5 * H, H, capacity=8)
    assert starts == [T0, T0 + H, T0 + 2 * H]
    assert allocated == pytest.approx([2 + 2, 1 + 4, 4])  # the last bucket is half an hour long: its mean is 4
    assert fraction == pytest.approx([0.5, 5 / 8, 0.5])
    assert utilization(runs, T0, T0 + H, H, capacity=0)[2] == [None]


def test_top_users_rank_by_gpu_hours_with_share_and_tasks():
    runs = [Run(1, "ann", 1, T0, T0 + H), Run(2, "bob", 3, T0, T0 + H), Run(3, "bob", 1, T0, T0 + H)]
    got = top_users(runs, T0, T0 + H, {"bob": "lab"}, limit=5)
    assert got == [{"user": "bob", "group": "lab", "gpu_hours": 4.0, "tasks": 2, "share": 0.8},
                   {"user": "ann", "group": "default", "gpu_hours": 1.0, "tasks": 1, "share": 0.2}]
    assert top_users(runs, T0, T0 + H, {}, limit=1)[0]["user"] == "bob"
    assert top_users([], T0, T0 + H, {}) == []


def _task(store: Store, owner: str, gpus: int, started: float, finished: float | None) -> int:
    (rec,) = store.insert_tasks([NewTask(owner, "t", "d" * 64, {}, {}, submitted_at=started - 60, gpus=gpus)])
    with store.engine.begin() as conn:
        conn.execute(sa.update(tasks).where(tasks.c.id == rec.id).values(started_at=started, finished_at=finished))
    return rec.id


def test_the_usage_command_writes_csv_and_a_table_that_add_up(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'tacc.sqlite'}")
    store.migrate()
    _task(store, "ann", 2, T0 + 23 * H, T0 + DAY + H)  # 1 h on Nov 1, 1 h on Nov 2, x2
    _task(store, "bob", 1, T0 + DAY + 2 * H, T0 + DAY + 5 * H)  # 3 h on Nov 2
    _task(store, "bob", 1, T0 + 40 * DAY, T0 + 40 * DAY + H)  # after --until: not in it
    store.set_group("ann", "lab")
    store.close()
    db = f"--db-url=sqlite:///{tmp_path / 'tacc.sqlite'}"
    r = CliRunner().invoke(cli, ["usage", "--since", "2026-11-01", "--until", "2026-11-03", "--csv", db])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "day,user,group,gpu_hours,tasks"
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert [(x["day"], x["user"], x["group"], float(x["gpu_hours"]), int(x["tasks"])) for x in rows] == [
        ("2026-11-01", "ann", "lab", 2.0, 1), ("2026-11-02", "ann", "lab", 2.0, 1),
        ("2026-11-02", "bob", "default", 3.0, 1)]
    by_group = CliRunner().invoke(cli, ["usage", "--since", "2026-11-01", "--until", "2026-11-03", "--by", "group",
                                        "--csv", db])
    grows = list(csv.DictReader(io.StringIO(by_group.output)))
    assert {(x["day"], x["group"]): float(x["gpu_hours"]) for x in grows} == {
        ("2026-11-01", "lab"): 2.0, ("2026-11-02", "lab"): 2.0, ("2026-11-02", "default"): 3.0}
    table = CliRunner().invoke(cli, ["usage", "--since", "2026-11-01", "--until", "2026-11-03", db])
    assert table.exit_code == 0
    assert table.output.splitlines()[0].split() == ["DAY", "USER", "GROUP", "GPU-HOURS", "TASKS"]
    assert table.output.splitlines()[-1].split() == ["TOTAL", "7.00"]
    # the same numbers as the accounting the API and the quotas use
    store = Store(f"sqlite:///{tmp_path / 'tacc.sqlite'}")
    try:
        lo, hi = T0, T0 + 3 * DAY
        assert sum(store.gpu_seconds_by_owner(lo, hi).values()) / H == pytest.approx(7.0)
        assert usage_rows(store.runs_between(lo, hi), [lo, lo + DAY, lo + 2 * DAY], hi, store.memberships()) == [
            {k: (float(v) if k == "gpu_hours" else int(v) if k == "tasks" else v) for k, v in x.items()} for x in rows]
    finally:
        store.close()


@pytest.mark.parametrize("args, message", [
    (["--since", "yesterday"], "not a date"), (["--since", "2026-11-05", "--until", "2026-11-01"], "before --since"),
    (["--since", "2000-01-01", "--until", "2026-01-01"], "at most"), (["--since", "2026-11-01", "--by", "x"], "x"),
])
def test_the_usage_command_refuses_bad_options(tmp_path, args, message):
    r = CliRunner().invoke(cli, ["usage", *args, f"--state-dir={tmp_path}"])
    assert r.exit_code == 2 and message in r.output, r.output
