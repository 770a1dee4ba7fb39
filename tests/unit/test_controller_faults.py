"""The controller's fault handling with the fake executor: node failures (requeue or fail), an unreachable cluster."""

from __future__ import annotations

import asyncio
import time

import pytest

from tacc_hub.executors import FakeExecutor
from tacc_hub.scheduler.policies import FifoGang
from tacc_hub.service.controller import Controller
from tacc_hub.service.recovery import REQUEUES_KEY
from tacc_hub.store import NewTask, TaskStatus
from tests.unit.test_controller import env, spec, until  # noqa: F401 - env is a fixture

S = TaskStatus


def make(env, ex: FakeExecutor, max_requeues: int = 3, refresh: float = 0.05) -> Controller:  # noqa: F811
    store, codes, site, _ = env
    return Controller(store, ex, site, FifoGang(), codes, poll_interval=0.05, max_requeues=max_requeues,
                      node_refresh_interval=refresh, down_recheck=0.05)


def down(ctl: Controller) -> set[str]:
    """The nodes new tasks may not go to (the one bookkeeping: ``Node.schedulable``)."""
    return {name for name, n in ctl.cluster.nodes.items() if not n.schedulable}


def node_of(ctl: Controller, task_id: int) -> str:
    placement = ctl.store.get(task_id).placement
    assert placement is not None
    return str(placement["nodes"][0]["node"])


async def test_node_failure_requeues_a_task_that_asks_and_avoids_the_dead_node(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2, nodes=2)
    ctl = make(env, ex, max_requeues=2)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, gpus=2, qos={"requeue": True}))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        first = node_of(ctl, rec.id)
        assert ex.fail_node(first) == [rec.id]
        # Back in the queue, then started again (a second launch), on the other node only.
        await until(lambda: len(ex.launched) == 2 and ctl.store.get(rec.id).status == S.RUNNING)
        again = ctl.store.get(rec.id)
        assert node_of(ctl, rec.id) != first and down(ctl) == {first}
        assert ctl.cluster.nodes[first].state == "down"
        assert ex.launched[1].attempt == 1  # the task sees TACC_ATTEMPT=1
        assert again.executor_state[REQUEUES_KEY] == 1  # the count survives a restart
        assert len(ctl.store.list_tasks(None, [S.PENDING], 10, None)[0]) == 0
        # The dead node comes back: the controller sees it again (the periodic node refresh).
        ex.restore_node(first)
        await until(lambda: not down(ctl))
        # Second failure: requeued (2 of 2); third: it fails, naming the node and why.
        assert ex.fail_node(node_of(ctl, rec.id)) == [rec.id]
        await until(lambda: len(ex.launched) == 3 and ctl.store.get(rec.id).status == S.RUNNING)
        last = node_of(ctl, rec.id)
        assert ex.fail_node(last) == [rec.id]
        await until(lambda: ctl.store.get(rec.id).status == S.FAILED)
        done = ctl.store.get(rec.id)
        assert f"node failure on {last} at " in done.reason, done.reason
        assert "not requeued again: requeued 2 times already (max_requeues)" in done.reason, done.reason
        assert "[requeue]" not in done.reason and len(ex.launched) == 3
        assert ctl.cluster.held == {} and rec.id not in ctl.requeues
    finally:
        await ctl.stop()


async def test_node_failure_fails_a_task_that_does_not_ask(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2, nodes=2)
    ctl = make(env, ex)
    await ctl.start()
    try:
        recs = [await ctl.submit("alice", spec(env, gpus=1)) for _ in range(2)]
        await until(lambda: all(ctl.store.get(r.id).status == S.RUNNING for r in recs))
        node = node_of(ctl, recs[0].id)
        assert node_of(ctl, recs[1].id) == node  # packed on one node
        assert sorted(ex.fail_node(node)) == [r.id for r in recs]
        await until(lambda: all(ctl.store.get(r.id).status == S.FAILED for r in recs))
        for r in recs:  # both name the node: they waited for the same re-read of the nodes
            done = ctl.store.get(r.id)
            assert done.reason.startswith(f"node failure on {node} at "), done.reason
            assert done.reason.endswith("not requeued: the task does not ask for it (qos.requeue)"), done.reason
        assert len(ex.launched) == 2 and down(ctl) == {node}
        assert [(n["name"], n["state"]) for n in ctl.cluster.summary() if not n["schedulable"]] == [(node, "down")]
        # A new task is placed on the node that is still up.
        other = await ctl.submit("alice", spec(env, gpus=2))
        await until(lambda: ctl.store.get(other.id).status == S.RUNNING)
        assert node_of(ctl, other.id) != node
    finally:
        await ctl.stop()


async def test_requeue_count_is_recovered_after_a_restart(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2, nodes=2)
    ctl = make(env, ex, max_requeues=1)
    await ctl.start()
    rec = await ctl.submit("alice", spec(env, gpus=2, qos={"requeue": True}))
    await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
    ex.fail_node(node_of(ctl, rec.id))
    await until(lambda: len(ex.launched) == 2 and ctl.store.get(rec.id).status == S.RUNNING)
    await ctl.stop()
    ctl2 = make(env, ex, max_requeues=1)  # the same executor: the task still runs there
    await ctl2.start()
    try:
        assert ctl2.requeues == {rec.id: 1}
        ex.fail_node(node_of(ctl2, rec.id))
        await until(lambda: ctl2.store.get(rec.id).status == S.FAILED)
        assert "requeued 1 times already" in ctl2.store.get(rec.id).reason
    finally:
        await ctl2.stop()


async def test_unreachable_cluster_holds_launches_with_a_reason_then_launches(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2, nodes=1)
    ctl = make(env, ex)
    await ctl.start()
    try:
        running = await ctl.submit("alice", spec(env, gpus=1))
        await until(lambda: ctl.store.get(running.id).status == S.RUNNING)
        why = "Slurm unreachable since 12:00:00 UTC (3 failed tries): connect failure"
        ex.unreachable = ex.hold = why
        waiting = await ctl.submit("alice", spec(env, gpus=1))
        await until(lambda: ex.probes >= 2)
        rec = ctl.store.get(waiting.id)
        assert rec.status == S.PENDING and len(ex.launched) == 1
        info = ctl.queue_info(rec)
        assert info is not None and info.reason == "Unavailable" and info.detail == why
        assert ctl.reason_for(rec) == f"Unavailable: {why}"
        assert ctl.store.get(running.id).status == S.RUNNING  # unknown is not gone
        ex.unreachable = None  # back: the next probe lifts the hold and the task launches
        await until(lambda: ctl.store.get(waiting.id).status == S.RUNNING)
        assert ctl.launch_hold is None and len(ex.launched) == 2
        assert ctl.queue_info(ctl.store.get(waiting.id)) is None
    finally:
        await ctl.stop()


@pytest.mark.parametrize("cancel", [False, True])
async def test_a_launch_that_cannot_reach_the_cluster_waits_again(env, cancel: bool) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2, nodes=1)
    ex.unreachable = "connect failure"  # launches fail, but the executor does not hold them yet
    ctl = make(env, ex)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, gpus=2))
        await until(lambda: (ctl.store.get(rec.id).reason or "").startswith("waiting: could not reach"))
        got = ctl.store.get(rec.id)
        assert got.status in (S.PENDING, S.STARTING) and got.finished_at is None
        if cancel:
            await ctl.cancel(ctl.store.get(rec.id))
            await until(lambda: ctl.store.get(rec.id).status == S.CANCELLED)
            assert ex.launched == [] and ctl.cluster.held == {}
            return
        ex.unreachable = None
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        assert len(ex.launched) == 1 and ex.launched[0].attempt == 0
    finally:
        await ctl.stop()


async def test_a_requeued_task_waits_for_its_node_and_says_why(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2, nodes=1)
    ctl = make(env, ex)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, gpus=2, qos={"requeue": True}))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        ex.fail_node("n1")
        await until(lambda: ctl.store.get(rec.id).status == S.PENDING)
        ctl._explained_at = float("-inf")
        why = ctl.reason_for(ctl.store.get(rec.id))  # the queue's reason, and what happened before
        assert why.startswith("Resources") and "(after: node failure on n1 at " in why, why
        assert "requeued (1 of at most 3)" in why, why
        await asyncio.sleep(0.3)
        assert len(ex.launched) == 1  # never placed on the dead node
        ex.restore_node("n1")
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        assert len(ex.launched) == 2 and not down(ctl)
    finally:
        await ctl.stop()


async def test_a_crash_before_the_launch_of_a_requeued_task_requeues_it_again(env) -> None:  # noqa: F811
    store = env[0]
    ex = FakeExecutor(gpus=2, nodes=1)
    task = spec(env, gpus=2, qos={"requeue": True})
    plan = make(env, ex).compile(task)
    rec = store.insert_tasks([NewTask(owner="alice", name="t", digest=plan.task_digest,
                                      spec=task.model_dump(mode="json", by_alias=True),
                                      plan=plan.model_dump(mode="json"), submitted_at=time.time())])[0]
    # What a crash between placement and launch leaves of a task requeued once before.
    store.transition(rec.id, S.STARTING, expected=S.PENDING, placement={"nodes": [{"node": "n1", "gpus": [0, 1]}]},
                     executor_state={REQUEUES_KEY: 1})
    ctl = make(env, ex)
    await ctl.start()
    try:
        await until(lambda: store.get(rec.id).status == S.RUNNING)
        assert ctl.requeues == {rec.id: 1} and store.get(rec.id).executor_state[REQUEUES_KEY] == 1
    finally:
        await ctl.stop()


async def test_without_the_node_refresh_a_failed_node_is_read_again_until_it_is_back(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2, nodes=2)
    ctl = make(env, ex, refresh=0)  # node_refresh_interval 0: only the re-check while some are down
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, gpus=2, qos={"requeue": True}))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        first = node_of(ctl, rec.id)
        ex.fail_node(first)
        await until(lambda: len(ex.launched) == 2 and ctl.store.get(rec.id).status == S.RUNNING)
        assert down(ctl) == {first}
        ex.restore_node(first)
        await until(lambda: not down(ctl))
    finally:
        await ctl.stop()
