"""The audit trail in the store (SQLite and PostgreSQL): rows with target, before, after and request id; filters;
keyset pages newest first; hostile text kept as data."""

from __future__ import annotations

import pytest

from tacc_hub.store import Store
from tacc_hub.store.audit import AUDIT_ACTIONS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 10.0
        return self.now


def test_rows_keep_target_before_after_and_request_id(store: Store) -> None:
    eid = store.add_audit("root", "quota_set", None, {}, target="quota:user/alice", before=None,
                          after={"max_gpus": 8, "gpu_hours": 1.5}, request_id="0123456789abcdef")
    [ev] = store.audit()
    assert ev.id == eid
    assert (ev.actor, ev.action, ev.target, ev.before, ev.after, ev.request_id) == (
        "root", "quota_set", "quota:user/alice", None, {"max_gpus": 8, "gpu_hours": 1.5}, "0123456789abcdef")
    assert ev.to_json() == {"id": eid, "at": ev.at, "actor": "root", "action": "quota_set",
                            "target": "quota:user/alice", "task_id": None, "before": None,
                            "after": {"max_gpus": 8, "gpu_hours": 1.5}, "detail": {},
                            "request_id": "0123456789abcdef"}


def test_the_old_call_still_works(store: Store) -> None:
    store.add_audit("alice", "exec", 12, {"argv": ["ls"]})
    [ev] = store.audit(task_id=12)
    assert (ev.actor, ev.action, ev.task_id, ev.detail, ev.target, ev.before, ev.after, ev.request_id) == (
        "alice", "exec", 12, {"argv": ["ls"]}, None, None, None, None)


def test_filters_and_keyset_pages(store: Store) -> None:
    store._clock = Clock()  # type: ignore[assignment]  # at = 1010, 1020, ... in insertion order
    ids = []
    for i in range(25):
        ids.append(store.add_audit("root" if i % 2 else "bob", "cancel" if i % 3 else "group_set", i,
                                   target=f"task:{i}", before={"status": "running"}, after={"status": "cancelled"}))
    assert [e.id for e in store.audit(limit=1000)] == ids[::-1]
    assert {e.actor for e in store.audit(actor="bob")} == {"bob"}
    assert len(store.audit(actor="bob")) == 13
    assert {e.action for e in store.audit(action="group_set")} == {"group_set"}
    assert [e.task_id for e in store.audit(target="task:7")] == [7]
    assert [e.task_id for e in store.audit(since=1050, until=1080)] == [6, 5, 4]  # at 1050 .. 1070
    assert [e.task_id for e in store.audit(actor="root", action="cancel", since=1100)] == [23, 19, 17, 13, 11]

    # pages of 10, newest first, each after the last id of the one before
    pages, before = [], None
    while True:
        page = store.audit(limit=10, before_id=before)
        if not page:
            break
        pages.append([e.id for e in page])
        before = page[-1].id
    assert pages == [ids[::-1][0:10], ids[::-1][10:20], ids[::-1][20:25]]
    assert len(store.audit(limit=0)) == 1 and len(store.audit(limit=10**9)) == 25  # the clamp


def test_refuses_unknown_actions_and_oversized_targets(store: Store) -> None:
    with pytest.raises(ValueError, match="action"):
        store.add_audit("root", "drop_tables", None, {})
    with pytest.raises(ValueError, match="target"):
        store.add_audit("root", "cancel", None, {}, target="x" * 129)
    with pytest.raises(ValueError, match="request_id"):
        store.add_audit("root", "cancel", None, {}, target="task:1", request_id="r" * 33)
    assert store.audit() == []
    assert len(AUDIT_ACTIONS) == len(set(AUDIT_ACTIONS))


def test_hostile_text_is_data(store: Store) -> None:
    note = "x'); DROP TABLE audit_events; --\x1b]52;c;Zm9v\x07\u202e"
    store.add_audit("root", "token_create", None, {}, target="token:3", after={"note": note, "user": "bob"})
    [ev] = store.audit(target="token:3")
    assert ev.after == {"note": note, "user": "bob"}
    assert store.audit(actor="root' OR '1'='1") == []
