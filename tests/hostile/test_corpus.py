"""Every entry of the hostile corpus against one real service, then what the corpus left behind.

Per entry: an answer, never a 5xx, and the entry's expectation (a 4xx naming the field, or accepted
with the value stored literally). After the whole corpus (the tests below run in file order): the
accepted tasks ran and nothing executed (the canary directory is empty), refused requests took no
task id (the ids between a sentinel before and one after are exactly the ids of tasks created),
and the store is consistent.
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any

import pytest

from tacc_hub.store.models import STATUS_VALUES

from .conftest import TERMINAL, Hostile, named, submit_sentinel
from .corpus import CORPUS, MALLORY, Entry

USER_OR_GROUP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


def _walk(doc: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def _show(out: Any) -> str:
    return json.dumps(out, default=str)[:1500]


@pytest.mark.parametrize("entry", CORPUS, ids=[e.id for e in CORPUS])
def test_entry(hostile: Hostile, entry: Entry) -> None:
    out = hostile.send(entry)
    assert out.status is not None, f"no answer: {out.error}"
    assert out.status < 500, f"{out.status}: {_show(out.body)}"
    if entry.expect == "4xx":
        assert 400 <= out.status < 500, f"expected a 4xx, got {out.status}: {_show(out.body)}"
        if entry.statuses:
            assert out.status in entry.statuses, f"expected {entry.statuses}, got {out.status}: {_show(out.body)}"
        if entry.fields:
            assert named(out.body, entry.fields), f"{out.status} does not name {entry.fields}: {_show(out.body)}"
        return
    assert 200 <= out.status < 300, f"expected a 2xx, got {out.status}: {_show(out.body)}"
    if entry.probe is None:
        return
    where, path, value = entry.probe
    expected = hostile.fill(value) if isinstance(value, str) else value
    if where == "spec":
        assert out.task_id is not None, _show(out.body)
        status, task = hostile.api(MALLORY).call("GET", f"/api/tasks/{out.task_id}")
        assert status == 200, task
        assert _walk(task["spec"], path) == expected, _show(task["spec"])
    elif path == ("owners",):  # only the caller's own tasks are listed
        assert {t["owner"] for t in out.body["tasks"]} <= set(value), _show(out.body)
    elif path == ("token_users",):  # only the caller's own tokens are listed
        assert {t["user"] for t in out.body["tokens"]} <= set(value), _show(out.body)
    else:
        assert _walk(out.body, path) == expected, _show(out.body)


def test_no_entry_got_a_5xx_or_no_answer(hostile: Hostile) -> None:
    bad = {k: (o.status, o.error) for k, o in hostile.outcomes.items() if o.status is None or o.status >= 500}
    assert not bad, f"{len(bad)} entries: {bad}"


def test_accepted_tasks_ran_and_nothing_executed(hostile: Hostile) -> None:
    ids = hostile.created()
    done = hostile.wait_terminal(ids)
    assert set(done) == set(ids), f"tasks still not finished: {sorted(set(ids) - set(done))}"
    assert sorted(p.name for p in hostile.canary.iterdir()) == [], "a hostile value was executed"


def test_refused_requests_took_no_task_id(hostile: Hostile) -> None:
    after = submit_sentinel(hostile.api(MALLORY), hostile.places["@CODE@"], "sentinel-after")
    between = list(range(hostile.sentinel_before + 1, after))
    assert hostile.created() == between, "ids between the sentinels are not exactly the tasks created"


def test_store_is_consistent(hostile: Hostile) -> None:
    """``Store.integrity_problems()`` where the store has it; else the SQLite file, read-only, checked here."""
    db = hostile.svc.state_dir / "tacc.sqlite"
    from tacc_hub.store import Store

    store = Store(f"sqlite:///{db}")
    try:
        check = getattr(store, "integrity_problems", None)
        if check is not None:
            assert check() == []
    finally:
        store.close()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = conn.execute("SELECT id, owner, status, spec, plan FROM tasks ORDER BY id").fetchall()
        for tid, owner, status, spec, plan in rows:
            assert status in STATUS_VALUES, (tid, status)
            assert isinstance(json.loads(spec), dict) and isinstance(json.loads(plan), dict), tid
            assert USER_OR_GROUP.fullmatch(owner), (tid, owner)
        mine = [r[0] for r in rows if r[1] == MALLORY]
        assert set(hostile.created()) <= set(mine)
        unfinished = [r[0] for r in rows if r[2] not in TERMINAL]
        assert unfinished == [], f"tasks not finished: {unfinished}"
        # nothing hostile half-stored in the admin tables
        for kind, name in conn.execute("SELECT kind, name FROM quotas"):
            assert name == "*" or USER_OR_GROUP.fullmatch(name), (kind, name)
        for user, group in conn.execute('SELECT user, "group" FROM memberships'):
            assert USER_OR_GROUP.fullmatch(user) and USER_OR_GROUP.fullmatch(group), (user, group)
    finally:
        conn.close()
