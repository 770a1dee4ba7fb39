"""The state machine, table-driven over every (from, to) pair, in code and in the database."""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa

from tacc_hub.store import (
    ACTIVE,
    TERMINAL,
    TRANSITIONS,
    IllegalTransition,
    NewTask,
    Store,
    TaskStatus,
    can_move,
    check_move,
)

S = TaskStatus

# The table from the design, written out independently of TRANSITIONS so an edit there shows.
LEGAL: set[tuple[TaskStatus, TaskStatus]] = {
    (S.PENDING, S.STARTING),
    (S.PENDING, S.CANCELLED),
    (S.STARTING, S.RUNNING),
    (S.STARTING, S.PENDING),
    (S.STARTING, S.FAILED),
    (S.STARTING, S.CANCELLING),
    (S.STARTING, S.CANCELLED),
    (S.STARTING, S.LOST),
    (S.RUNNING, S.SUCCEEDED),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.CANCELLING),
    (S.RUNNING, S.LOST),
    (S.RUNNING, S.PENDING),  # preempted: back to the queue
    (S.CANCELLING, S.CANCELLED),
    (S.CANCELLING, S.LOST),
}
ALL_PAIRS = list(itertools.product(TaskStatus, TaskStatus))


def test_values_are_lowercase_names():
    assert [s.value for s in TaskStatus] == [
        "pending",
        "starting",
        "running",
        "cancelling",
        "succeeded",
        "failed",
        "cancelled",
        "lost",
    ]
    assert all(s.value == s.name.lower() for s in TaskStatus)
    assert S("running") is S.RUNNING


def test_table_is_exactly_the_design():
    assert {(a, b) for a, outs in TRANSITIONS.items() for b in outs} == LEGAL
    assert set(TRANSITIONS) == set(TaskStatus)


@pytest.mark.parametrize(("frm", "to"), ALL_PAIRS, ids=[f"{a}->{b}" for a, b in ALL_PAIRS])
def test_every_pair(frm: TaskStatus, to: TaskStatus):
    legal = (frm, to) in LEGAL
    assert can_move(frm, to) is legal
    assert can_move(frm.value, to.value) is legal
    assert frm.can_move_to(to) is legal
    if legal:
        check_move(7, frm, to)
    else:
        with pytest.raises(IllegalTransition) as info:
            check_move(7, frm, to)
        assert (info.value.task_id, info.value.from_status, info.value.to_status) == (7, frm, to)
        assert isinstance(info.value, ValueError)
        assert f"{frm.value} -> {to.value}" in str(info.value)


def test_terminal_and_active():
    assert {S.SUCCEEDED, S.FAILED, S.CANCELLED, S.LOST} == TERMINAL
    assert frozenset(TaskStatus) - TERMINAL == ACTIVE
    for s in TaskStatus:
        assert s.is_terminal() is (s in TERMINAL)
        if s.is_terminal():
            assert not TRANSITIONS[s]
            assert not any(can_move(s, t) for t in TaskStatus)
        else:
            assert TRANSITIONS[s]


def test_store_applies_every_legal_pair_and_refuses_every_illegal_one(store: Store):
    """One task per pair, created in ``frm``; legal moves land, illegal ones touch nothing."""
    statements: list[str] = []

    def spy(conn, cursor, statement, params, context, executemany):
        statements.append(statement)

    rows = [NewTask("ann", f"{a}-{b}", "d", {}, {}, 1.0, status=a) for a, b in ALL_PAIRS]
    records = store.insert_tasks(rows)
    sa.event.listen(store.engine, "before_cursor_execute", spy)
    try:
        for rec, (frm, to) in zip(records, ALL_PAIRS, strict=True):
            statements.clear()
            if (frm, to) in LEGAL:
                out = store.transition(rec.id, to, expected=frm)
                assert out is not None and out.status is to and out.id == rec.id
            else:
                with pytest.raises(IllegalTransition) as info:
                    store.transition(rec.id, to, expected=frm)
                assert info.value.task_id == rec.id
                assert statements == [], "an illegal move must be refused before the database is touched"
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", spy)
    for rec, (frm, to) in zip(records, ALL_PAIRS, strict=True):
        got = store.get(rec.id)
        assert got is not None
        assert got.status is (to if (frm, to) in LEGAL else frm)


def test_store_refuses_when_any_expected_status_is_illegal(store: Store):
    (rec,) = store.insert_tasks([NewTask("ann", "t", "d", {}, {}, 1.0)])
    # PENDING -> CANCELLED is legal, RUNNING -> CANCELLED is not: the whole call is refused.
    with pytest.raises(IllegalTransition) as info:
        store.transition(rec.id, S.CANCELLED, expected=[S.PENDING, S.RUNNING])
    assert (info.value.from_status, info.value.to_status) == (S.RUNNING, S.CANCELLED)
    assert store.get(rec.id).status is S.PENDING
