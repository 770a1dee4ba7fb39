"""Automatic restarts (qos.max_restarts, qos.restart_on) with the fake executor: backoff, counts, cancel, recovery."""

from __future__ import annotations

import time
from typing import Any

from tacc_hub.executors import FakeExecutor, Launch
from tacc_hub.scheduler.policies import FifoGang
from tacc_hub.service.controller import Controller
from tacc_hub.service.recovery import NOT_BEFORE_KEY, RESTARTS_KEY
from tacc_hub.store import TaskStatus
from tests.unit.test_controller import env, spec, until  # noqa: F401 - env is a fixture

S = TaskStatus


class TimedFake(FakeExecutor):
    """Remembers when each launch happened."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.launched_at: list[float] = []

    async def launch(self, launch: Launch) -> dict[str, Any]:
        self.launched_at.append(time.time())
        return await super().launch(launch)


def make(env, ex: FakeExecutor, backoff: float = 0.2) -> Controller:  # noqa: F811
    store, codes, site, _ = env
    return Controller(store, ex, site, FifoGang(), codes, poll_interval=0.02, restart_backoff=backoff)


def retrying(env, n: int, on: list[str] | None = None, gpus: int = 1):  # noqa: F811
    qos: dict[str, Any] = {"max_restarts": n}
    if on is not None:
        qos["restart_on"] = on
    return spec(env, gpus=gpus, qos=qos)


async def test_fails_twice_then_succeeds_with_backoff(env) -> None:  # noqa: F811
    ex = TimedFake(gpus=2)
    ctl = make(env, ex, backoff=0.2)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", retrying(env, 2))
        not_befores = []
        for k in range(2):
            await until(lambda k=k: len(ex.launched) == k + 1 and ctl.store.get(rec.id).status == S.RUNNING)
            ex.finish(rec.id, 3)
            await until(lambda: ctl.store.get(rec.id).status == S.PENDING)
            got = ctl.store.get(rec.id)
            assert got.placement is None and got.started_at is None
            assert got.executor_state[RESTARTS_KEY] == k + 1
            not_befores.append(got.executor_state[NOT_BEFORE_KEY])
            assert f"restarting (restart {k + 1} of 2) at " in got.reason, got.reason
            assert got.reason.endswith(" UTC after: exited with status 3"), got.reason
            assert ctl.cluster.held == {}  # its GPUs are free while it waits out the backoff
        await until(lambda: len(ex.launched) == 3 and ctl.store.get(rec.id).status == S.RUNNING)
        # Each restart waited for its not-before time, and the backoff doubled (0.2 s, then 0.4 s).
        for k, nb in enumerate(not_befores):
            assert ex.launched_at[k + 1] >= nb
        attempts = ctl.store.attempts(rec.id)
        assert not_befores[0] - attempts[0].finished_at >= 0.2 - 1e-6
        assert not_befores[1] - attempts[1].finished_at >= 0.4 - 1e-6
        assert [la.attempt for la in ex.launched] == [0, 1, 2]  # TACC_ATTEMPT counts the earlier runs
        running = ctl.runs(ctl.store.get(rec.id))
        assert [r["outcome"] for r in running] == ["failed", "failed", "running"]
        assert ctl.time_info(ctl.store.get(rec.id))["attempt"] == 2
        ex.finish(rec.id, 0)
        await until(lambda: ctl.store.get(rec.id).status == S.SUCCEEDED)
        attempts = ctl.store.attempts(rec.id)
        assert [(a.attempt, a.outcome, a.exit_code) for a in attempts] == [
            (0, "failed", 3), (1, "failed", 3), (2, "succeeded", 0)]
        assert attempts[0].nodes == ["n1"]
        info = ctl.time_info(ctl.store.get(rec.id))
        assert info["attempt"] == 2 and info["max_restarts"] == 2 and info["time_left"] is None
    finally:
        await ctl.stop()


async def test_fails_three_times_then_fails_for_good(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2)
    ctl = make(env, ex, backoff=0.01)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", retrying(env, 2))
        for k in range(3):
            await until(lambda k=k: len(ex.launched) == k + 1 and ctl.store.get(rec.id).status == S.RUNNING)
            ex.finish(rec.id, 7)
        await until(lambda: ctl.store.get(rec.id).status == S.FAILED)
        done = ctl.store.get(rec.id)
        assert done.exit_code == 7 and len(ex.launched) == 3
        assert done.reason == "exited with status 7; not restarted again: restarted 2 times already (max_restarts)"
        assert [a.outcome for a in ctl.store.attempts(rec.id)] == ["failed"] * 3
        assert rec.id not in ctl.restarts and ctl.cluster.held == {}
    finally:
        await ctl.stop()


async def test_cancel_during_backoff(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2)
    ctl = make(env, ex, backoff=60.0)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", retrying(env, 2))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        ex.finish(rec.id, 1)
        await until(lambda: ctl.store.get(rec.id).status == S.PENDING)
        assert rec.id in ctl.held and rec.id not in ctl.queue.waiting
        assert ctl.status_of(rec.id) == S.PENDING
        done = await ctl.cancel(ctl.store.get(rec.id))
        assert done.status == S.CANCELLED and rec.id not in ctl.held
        assert len(ex.launched) == 1
    finally:
        await ctl.stop()


async def test_restart_count_and_hold_survive_a_service_restart(env) -> None:  # noqa: F811
    ex = TimedFake(gpus=2)
    ctl = make(env, ex, backoff=1.0)
    await ctl.start()
    rec = await ctl.submit("alice", retrying(env, 2))
    try:
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        ex.finish(rec.id, 2)
        await until(lambda: ctl.store.get(rec.id).status == S.PENDING)
    finally:
        await ctl.stop()
    not_before = ctl.store.get(rec.id).executor_state[NOT_BEFORE_KEY]
    ex2 = TimedFake(gpus=2)
    ctl2 = make(env, ex2, backoff=1.0)
    await ctl2.start()
    try:
        assert rec.id in ctl2.held and ctl2.restarts[rec.id] == 1
        await until(lambda: len(ex2.launched) == 1 and ctl2.store.get(rec.id).status == S.RUNNING)
        assert ex2.launched_at[0] >= not_before  # the hold was kept across the restart
        assert ex2.launched[0].attempt == 1
        ex2.finish(rec.id, 2)
        await until(lambda: ctl2.store.get(rec.id).status == S.PENDING)
        assert "(restart 2 of 2)" in ctl2.store.get(rec.id).reason
        ctl2.held[rec.id] = (0.0, ctl2.held[rec.id][1])  # the second backoff (2 s) need not be waited out
        await until(lambda: len(ex2.launched) == 2 and ctl2.store.get(rec.id).status == S.RUNNING)
        ex2.finish(rec.id, 2)
        await until(lambda: ctl2.store.get(rec.id).status == S.FAILED)
        assert [a.attempt for a in ctl2.store.attempts(rec.id)] == [0, 1, 2]
    finally:
        await ctl2.stop()


async def test_restart_on_without_failure_does_not_restart_a_failure(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2)
    ctl = make(env, ex, backoff=0.01)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", retrying(env, 2, on=["node_failure"]))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        ex.finish(rec.id, 3)
        await until(lambda: ctl.store.get(rec.id).status == S.FAILED)
        assert ctl.store.get(rec.id).reason == "exited with status 3" and len(ex.launched) == 1
        # The default (no max_restarts) does not restart either.
        plain = await ctl.submit("alice", spec(env, gpus=1))
        await until(lambda: ctl.store.get(plain.id).status == S.RUNNING)
        ex.finish(plain.id, 3)
        await until(lambda: ctl.store.get(plain.id).status == S.FAILED)
        assert len(ex.launched) == 2
        assert [a.outcome for a in ctl.store.attempts(plain.id)] == ["failed"]
    finally:
        await ctl.stop()


async def test_node_failure_restarts_when_restart_on_names_it(env) -> None:  # noqa: F811
    ex = FakeExecutor(gpus=2, nodes=2)
    store, codes, site, _ = env
    ctl = Controller(store, ex, site, FifoGang(), codes, poll_interval=0.02, restart_backoff=0.01,
                     node_refresh_interval=0.05, down_recheck=0.05)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", retrying(env, 1, on=["node_failure"], gpus=2))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        node = ctl.store.get(rec.id).placement["nodes"][0]["node"]
        assert ex.fail_node(node) == [rec.id]
        await until(lambda: len(ex.launched) == 2 and ctl.store.get(rec.id).status == S.RUNNING)
        assert [a.outcome for a in ctl.store.attempts(rec.id)] == ["node_failure"]
        again = ctl.store.get(rec.id).placement["nodes"][0]["node"]
        assert again != node
        assert ex.fail_node(again) == [rec.id]  # no restart left
        await until(lambda: ctl.store.get(rec.id).status == S.FAILED)
        assert "not restarted again: restarted 1 times already (max_restarts)" in ctl.store.get(rec.id).reason
    finally:
        await ctl.stop()


async def test_our_preemption_counts_for_nothing(env) -> None:  # noqa: F811
    """A preemptible task stopped by our scheduler waits again without using a restart; its run is recorded."""
    ex = FakeExecutor(gpus=2)
    ctl = make(env, ex, backoff=0.01)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", retrying(env, 1))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        await ctl._preempt(rec.id)
        got = ctl.store.get(rec.id)
        assert got.status in (S.PENDING, S.STARTING, S.RUNNING)
        assert rec.id not in ctl.restarts
        assert [a.outcome for a in ctl.store.attempts(rec.id)] == ["preempted"]
    finally:
        await ctl.stop()


async def test_a_slurm_preemption_restarts_when_restart_on_names_it(env) -> None:  # noqa: F811
    from tacc_hub.executors import REQUEUE_MARK, Observation

    ex = FakeExecutor(gpus=2)
    ctl = make(env, ex, backoff=0.01)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", retrying(env, 1, on=["preemption"]))
        other = await ctl.submit("alice", retrying(env, 1, on=["failure"]))
        await until(lambda: all(ctl.store.get(r.id).status == S.RUNNING for r in (rec, other)))
        for r in (rec, other):
            ex.results[r.id] = Observation("exited", exit_code=1, reason=f"preempted by Slurm {REQUEUE_MARK}")
        ex.wake()
        await until(lambda: ctl.store.get(other.id).status == S.FAILED)
        assert "not requeued: the task does not ask for it" in ctl.store.get(other.id).reason
        await until(lambda: sum(la.task_id == rec.id for la in ex.launched) == 2
                    and ctl.store.get(rec.id).status == S.RUNNING)
        assert [a.outcome for a in ctl.store.attempts(rec.id)] == ["preempted"]
        assert [a.outcome for a in ctl.store.attempts(other.id)] == ["preempted"]
        assert ctl.restarts[rec.id] == 1
    finally:
        await ctl.stop()
