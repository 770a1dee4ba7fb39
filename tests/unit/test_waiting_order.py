"""``admission.WaitingOrder``: the presorted queue of the LAS and SRPT policies.

Synced from ``View.changes`` (O(changes)) it must yield exactly what a sync that compares every task yields,
and a waiting task whose view was replaced must be yielded with its new view (not dropped)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tacc_hub.scheduler.policies.admission import WaitingOrder
from tacc_hub.scheduler.policy import Changes, TaskView


def _view(tid: int, submit: float, gpus: int = 1) -> TaskView:
    return TaskView(id=tid, owner="u", group="g", submit=submit, nodes=1, gpus_per_node=gpus, predicted=60.0)


def _key(t: TaskView) -> tuple[float, int]:
    return (t.submit, t.id)


def test_replaced_view_is_yielded_with_the_new_view() -> None:
    order = WaitingOrder(_key)
    a, b = _view(1, 10.0), _view(2, 20.0)
    waiting = {1: a, 2: b}
    order.sync(waiting)
    assert [t for _, t in order(waiting)] == [a, b]
    a2 = replace(a, group="other")  # e.g. an admin moved the user: the service replaces the view
    waiting = {1: a2, 2: b}
    order.sync(waiting)
    got = [t for _, t in order(waiting)]
    assert got == [a2, b] and got[0] is a2


# one step: (op, task id) with op 0 add/re-add (a fresh view), 1 remove, 2 keep
steps = st.lists(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 15)), max_size=8), min_size=1, max_size=25)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_sync_from_changes_equals_a_full_sync(passes: list[list[tuple[int, int]]]) -> None:
    told, full = WaitingOrder(_key), WaitingOrder(_key)
    waiting: dict[int, TaskView] = {}
    serial, clock = 0, 0.0
    for ops in passes:
        changed: set[int] = set()
        for op, tid in ops:
            clock += 1.0
            if op == 0:
                waiting[tid] = _view(tid, clock if tid not in waiting else waiting[tid].submit)
                changed.add(tid)
            elif op == 1 and tid in waiting:
                del waiting[tid]
                changed.add(tid)
        snapshot = dict(waiting)
        told.sync(snapshot, Changes(serial + 1, serial, frozenset(changed), frozenset()))
        full.sync(snapshot)
        serial += 1
        want = sorted(snapshot.values(), key=_key)
        for order in (told, full):
            got = [t for _, t in order(snapshot)]
            assert got == want
            assert all(g is w for g, w in zip(got, want, strict=True))  # the current views, not stale ones
