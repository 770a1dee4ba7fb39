"""Every registered policy keeps the contract on random clusters and queues (hypothesis).

The checker here is independent of the simulator's: it replays the actions on its own
copy of the free slots.
"""

from __future__ import annotations

from dataclasses import replace

import hypothesis
import pytest
from hypothesis import strategies as st

from tacc_hub.scheduler.policies import POLICIES, make
from tacc_hub.scheduler.policy import Preempt, Start, TaskView, View, Wake
from tacc_hub.scheduler.topology import FreeMap, NodeView

given, settings = hypothesis.given, hypothesis.settings


@st.composite
def scenes(draw):
    n_nodes = draw(st.integers(1, 6))
    size = draw(st.integers(1, 8))
    per_switch = draw(st.integers(1, n_nodes))
    nodes = [NodeView(f"n{i}", size, f"s{i // per_switch}", tuple(range(size))) for i in range(n_nodes)]
    free = FreeMap(nodes)
    now = draw(st.floats(0, 1e5))
    running: dict[int, TaskView] = {}
    waiting: dict[int, TaskView] = {}
    for tid in range(draw(st.integers(0, 14))):
        flexible = draw(st.booleans())
        n = draw(st.integers(1, n_nodes))
        g = draw(st.integers(1, size))
        task = TaskView(
            id=tid, owner=f"u{tid % 3}", group=f"g{tid % 2}", submit=draw(st.floats(0, now)), nodes=n,
            gpus_per_node=g, predicted=draw(st.floats(1, 1e5)), duration=draw(st.floats(1, 1e5)),
            preemptible=draw(st.booleans()), flexible=flexible, attained=draw(st.floats(0, 1e4)),
            done=draw(st.floats(0, 10)),
        )
        fit = free.fit(n, g, flexible) if draw(st.booleans()) else None
        if fit is not None:
            free.take(fit.placement)
            running[tid] = replace(task, start=draw(st.floats(0, now)), placement=fit.placement)
        else:
            waiting[tid] = task
    nodes = [NodeView(nv.name, nv.gpus, nv.switch, tuple(free.free[nv.name])) for nv in nodes]
    return View(now, waiting, running, nodes)


def check(view: View, actions: list) -> None:
    free = {n.name: set(n.free) for n in view.nodes}
    size = {n.name: n.gpus for n in view.nodes}
    started: set[int] = set()
    preempted: set[int] = set()
    for a in actions:
        if isinstance(a, Preempt):
            task = view.running.get(a.task_id)
            assert task is not None, "preempted a task that is not running"
            assert task.preemptible, "preempted a non-preemptible task"
            assert a.task_id not in preempted, "preempted twice"
            preempted.add(a.task_id)
            for s in task.placement.nodes:
                free[s.node] |= set(s.gpus)
        elif isinstance(a, Start):
            task = view.waiting.get(a.task_id)
            assert task is not None, "started a task that is not waiting"
            assert a.task_id not in started, "started twice"
            started.add(a.task_id)
            slots = a.placement.nodes
            assert len({s.node for s in slots}) == len(slots), "a node twice in one placement"
            if task.flexible:
                assert a.placement.gpu_count == task.gpus and all(s.gpus for s in slots), "not all-or-nothing"
            else:
                assert len(slots) == task.nodes, "rigid task on the wrong number of nodes"
                assert all(len(s.gpus) == task.gpus_per_node for s in slots), "rigid task: wrong GPUs per node"
            for s in slots:
                assert len(set(s.gpus)) == len(s.gpus)
                assert all(0 <= g < size[s.node] for g in s.gpus)
                assert set(s.gpus) <= free[s.node], "GPU allocated twice"
                free[s.node] -= set(s.gpus)
        else:
            assert isinstance(a, Wake) and a.at > view.now


@pytest.mark.parametrize("name", sorted(POLICIES))
@settings(max_examples=100, deadline=None)
@given(view=scenes())
def test_policy_keeps_the_contract(name, view):
    policy = make(name)
    if not policy.oracle:  # the truth is hidden from non-oracles, as the simulator does
        view = View(view.now, {k: _hide(t) for k, t in view.waiting.items()},
                    {k: _hide(t) for k, t in view.running.items()}, view.nodes)
    snapshot = (dict(view.waiting), dict(view.running), tuple(view.nodes))
    check(view, policy.schedule(view))
    assert snapshot == (dict(view.waiting), dict(view.running), tuple(view.nodes)), "the view was mutated"


def _hide(t: TaskView) -> TaskView:
    return replace(t, duration=None)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_work_conserving_on_an_empty_cluster(name):
    nodes = [NodeView("n0", 4, "s0", (0, 1, 2, 3))]
    waiting = {1: TaskView(1, "u", "g", 0.0, 1, 2, predicted=10.0, duration=10.0)}
    actions = make(name).schedule(View(0.0, waiting, {}, nodes))
    assert [a.task_id for a in actions if isinstance(a, Start)] == [1]


def test_the_checker_catches_violations():
    nodes = [NodeView("n0", 2, "s0", (1,))]
    from tacc_hub.scheduler.cluster import NodeSlots, Placement

    held = Placement(nodes=[NodeSlots(node="n0", gpus=[0])])
    running = {1: TaskView(1, "u", "g", 0.0, 1, 1, 10.0, preemptible=False, start=0.0, placement=held)}
    waiting = {2: TaskView(2, "u", "g", 0.0, 1, 1, 10.0)}
    view = View(1.0, waiting, running, nodes)
    with pytest.raises(AssertionError, match="non-preemptible"):
        check(view, [Preempt(1)])
    with pytest.raises(AssertionError, match="twice"):
        check(view, [Start(2, held)])
