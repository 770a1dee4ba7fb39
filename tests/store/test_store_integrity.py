"""Store.integrity_problems: a store used through its API is consistent; rows written behind its back are named."""

from __future__ import annotations

import sqlalchemy as sa
from click.testing import CliRunner

from tacc_hub.cli.admin import cli
from tacc_hub.store import NewTask, Store, TaskStatus, api_tokens, tasks


def _new(name: str) -> NewTask:
    return NewTask("ann", name, "d" * 64, {"name": name}, {"steps": []}, 1000.0)


def test_a_store_used_through_its_api_is_consistent(store: Store):
    _, b, c = store.insert_tasks([_new("a"), _new("b"), _new("c")])
    assert store.transition(b.id, TaskStatus.STARTING, expected=TaskStatus.PENDING)
    assert store.transition(b.id, TaskStatus.RUNNING, expected=TaskStatus.STARTING, started_at=1001.0)
    assert store.transition(c.id, TaskStatus.CANCELLED, expected=TaskStatus.PENDING, finished_at=1002.0)
    store.add_token("ann", False, "h" * 64)
    store.revoke_tokens("ann")
    assert store.integrity_problems() == []


def test_rows_written_behind_the_stores_back_are_named(store: Store):
    a, b, c, d = store.insert_tasks([_new("a"), _new("b"), _new("c"), _new("d")])
    with store.engine.begin() as conn:
        conn.execute(sa.update(tasks).where(tasks.c.id == a.id).values(status="running"))  # no started_at
        conn.execute(sa.update(tasks).where(tasks.c.id == b.id).values(spec="not json"))
        conn.execute(sa.update(tasks).where(tasks.c.id == c.id).values(status="failed"))  # no finished_at
        conn.execute(sa.update(tasks).where(tasks.c.id == d.id).values(exit_code=3))  # pending with an exit code
        conn.execute(sa.insert(api_tokens).values(user="ann", admin=False, token_hash="x", created_at=10.0,
                                                  revoked_at=5.0))
    problems = store.integrity_problems()
    assert f"task {a.id}: running without started_at" in problems
    assert f"task {b.id}: spec or plan is not a JSON object" in problems
    assert f"task {c.id}: failed without finished_at" in problems
    assert f"task {d.id}: pending but has finished_at or an exit code" in problems
    assert any(p.endswith("revoked before it was created") for p in problems)
    assert len(problems) == 5, problems


def test_tacc_hub_check_reports_problems_and_exits_1(tmp_path):
    url = f"sqlite:///{tmp_path / 'tacc.sqlite'}"
    with Store(url) as store:
        store.migrate()
        (a,) = store.insert_tasks([_new("a")])
    ok = CliRunner().invoke(cli, ["check", f"--db-url={url}", f"--state-dir={tmp_path}"])
    assert ok.exit_code == 0 and "is consistent" in ok.output, ok.output
    with Store(url) as store, store.engine.begin() as conn:
        conn.execute(sa.update(tasks).where(tasks.c.id == a.id).values(status="running"))
    bad = CliRunner().invoke(cli, ["check", f"--db-url={url}", f"--state-dir={tmp_path}"])
    assert bad.exit_code == 1 and f"task {a.id}: running without started_at" in bad.output, bad.output
