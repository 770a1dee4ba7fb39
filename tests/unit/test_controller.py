"""The controller's wiring with a fake executor: scheduling, finishing, cancelling, recovery."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from tacc_hub.compiler import SiteProfile
from tacc_hub.executors import FakeExecutor, Observation
from tacc_hub.scheduler.policies import FifoGang
from tacc_hub.schema import SpecError, spec_from_data
from tacc_hub.service.controller import Conflict, Controller
from tacc_hub.snapshot import CodeStore, digest_of, pack
from tacc_hub.store import Store, TaskStatus

S = TaskStatus


@pytest.fixture
def env(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    codes = CodeStore(tmp_path / "code")
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("print(1)\n")
    data = pack(src)
    codes.put(digest_of(data), data)
    site = SiteProfile(pythons={"3.11": sys.executable}, default_python="3.11", env_root=str(tmp_path / "envs"),
                       code_root=str(tmp_path / "code"), max_gpus_per_node=4)
    return store, codes, site, digest_of(data)


def make(env, executor=None, cap=10):
    store, codes, site, _ = env
    return Controller(store, executor or FakeExecutor(gpus=4), site, FifoGang(), codes, poll_interval=0.05,
                      max_running_per_user=cap)


def spec(env, gpus=0, **kw):
    return spec_from_data({"name": "t", "code": {"kind": "snapshot", "digest": env[3]},
                           "entrypoint": {"argv": ["python", "a.py"]}, "resources": {"gpus_per_node": gpus}, **kw})


async def until(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_submit_runs_and_finishes(env):
    ctl = make(env)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, gpus=2))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        got = ctl.store.get(rec.id)
        assert got.placement == {"nodes": [{"node": "n1", "gpus": [0, 1]}]}
        assert got.executor_state == {"fake": rec.id}
        ctl.executor.finish(rec.id, 0)
        await until(lambda: ctl.store.get(rec.id).status == S.SUCCEEDED)
        assert ctl.cluster.nodes["n1"].holders == {}
        other = await ctl.submit("alice", spec(env))
        ctl_exec = ctl.executor
        await until(lambda: ctl.store.get(other.id).status == S.RUNNING)
        ctl_exec.finish(other.id, 3)
        await until(lambda: ctl.store.get(other.id).status == S.FAILED)
        assert ctl.store.get(other.id).exit_code == 3
    finally:
        await ctl.stop()


async def test_compile_refusals_store_nothing(env):
    ctl = make(env)
    await ctl.start()
    try:
        with pytest.raises(SpecError) as err:
            await ctl.submit("alice", spec(env, gpus=8))
        assert err.value.errors[0][0] == "resources.gpus_per_node"
        missing = spec_from_data({"name": "t", "code": {"kind": "snapshot", "digest": "f" * 64},
                                  "entrypoint": {"argv": ["true"]}})
        with pytest.raises(SpecError, match="not been uploaded"):
            await ctl.submit("alice", missing)
        assert ctl.store.list_tasks(None, None, 10, None)[1] == 0
    finally:
        await ctl.stop()


async def test_cancel_pending_and_running(env):
    ex = FakeExecutor(gpus=1)
    ctl = make(env, ex)
    await ctl.start()
    try:
        a = await ctl.submit("alice", spec(env, gpus=1))
        b = await ctl.submit("alice", spec(env, gpus=1))
        await until(lambda: ctl.store.get(a.id).status == S.RUNNING)
        done = await ctl.cancel(ctl.store.get(b.id))
        assert done.status == S.CANCELLED and b.id not in ctl.queue.waiting
        await ctl.cancel(ctl.store.get(a.id))
        await until(lambda: ctl.store.get(a.id).status == S.CANCELLED)
        assert ex.cancelled == [a.id]
        with pytest.raises(Conflict):
            await ctl.cancel(ctl.store.get(a.id))
    finally:
        await ctl.stop()


async def test_launch_failure_marks_failed_and_frees_slots(env):
    ctl = make(env, FakeExecutor(gpus=2, fail_launch=True))
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, gpus=2))
        await until(lambda: ctl.store.get(rec.id).status == S.FAILED)
        assert "fake launch failure" in ctl.store.get(rec.id).reason
        assert ctl.cluster.nodes["n1"].holders == {}
    finally:
        await ctl.stop()


async def test_vanished_task_is_lost_with_reason(env):
    ex = FakeExecutor()
    ctl = make(env, ex)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        ex.vanish(rec.id)
        await until(lambda: ctl.store.get(rec.id).status == S.LOST)
        assert ctl.store.get(rec.id).reason == "vanished"
    finally:
        await ctl.stop()


async def test_unknown_observation_is_not_gone(env):
    ex = FakeExecutor()
    ctl = make(env, ex)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        ex.results[rec.id] = Observation("unknown", reason="engine did not answer")
        await asyncio.sleep(0.3)
        assert ctl.store.get(rec.id).status == S.RUNNING
    finally:
        await ctl.stop()


async def test_recovery_after_restart(env):
    ex = FakeExecutor(gpus=2)
    ctl = make(env, ex)
    await ctl.start()
    running = await ctl.submit("alice", spec(env, gpus=1))
    gone = await ctl.submit("alice", spec(env, gpus=1))
    queued = await ctl.submit("alice", spec(env, gpus=2))
    await until(lambda: ctl.store.get(gone.id).status == S.RUNNING and ctl.store.get(running.id).status == S.RUNNING)
    await ctl.stop()
    # Another "process": a new controller on the same store; the fake engine kept one task.
    ex2 = FakeExecutor(gpus=2)
    ex2.results[running.id] = Observation("running")
    ctl2 = make(env, ex2)
    await ctl2.start()
    try:
        assert ctl2.store.get(gone.id).status == S.LOST
        assert ctl2.store.get(running.id).status == S.RUNNING
        assert running.id in ctl2.cluster.held  # its GPU is still accounted for
        assert ctl2.store.get(queued.id).status == S.PENDING  # needs 2 GPUs, one is held
        ex2.finish(running.id, 0)
        await until(lambda: ctl2.store.get(queued.id).status == S.RUNNING)
    finally:
        await ctl2.stop()


async def test_starting_without_launch_is_requeued_at_recovery(env):
    store = env[0]
    ctl = make(env)
    await ctl.start()
    rec = await ctl.submit("alice", spec(env))
    await until(lambda: store.get(rec.id).status == S.RUNNING)
    await ctl.stop()
    # Simulate a crash between placement and launch: a STARTING row with no executor state.
    fresh = await _insert_starting(env)
    ctl2 = make(env)
    await ctl2.start()
    try:
        await until(lambda: store.get(fresh).status == S.RUNNING)
    finally:
        await ctl2.stop()


async def _insert_starting(env) -> int:
    store = env[0]
    ctl = make(env, FakeExecutor())
    plan = ctl.compile(spec(env))
    from tacc_hub.store import NewTask

    rec = store.insert_tasks([NewTask(owner="bob", name="t", digest=plan.task_digest, spec={},
                                      plan=plan.model_dump(mode="json"), submitted_at=time.time())])[0]
    store.transition(rec.id, S.STARTING, expected=S.PENDING,
                     placement={"nodes": [{"node": "n1", "gpus": []}]})
    return rec.id


async def test_time_limit_fails_the_task(env):
    ex = FakeExecutor()
    ctl = make(env, ex)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, resources={"time_limit": 1}))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        await until(lambda: ctl.store.get(rec.id).status == S.FAILED, timeout=5)
        assert "time limit" in ctl.store.get(rec.id).reason
        assert ex.cancelled == [rec.id]
    finally:
        await ctl.stop()


async def test_cancel_requested_before_a_crash_is_carried_out_at_recovery(env):
    store = env[0]
    ex = FakeExecutor()
    ctl = make(env, ex)
    await ctl.start()
    rec = await ctl.submit("alice", spec(env))
    await until(lambda: store.get(rec.id).status == S.RUNNING)
    await ctl.stop()
    store.update(rec.id, expected=S.RUNNING, cancel_requested=True)  # asked while it was starting
    ex2 = FakeExecutor()
    ex2.results[rec.id] = Observation("running")
    ctl2 = make(env, ex2)
    await ctl2.start()
    try:
        await until(lambda: store.get(rec.id).status == S.CANCELLED)
        assert ex2.cancelled == [rec.id]
    finally:
        await ctl2.stop()


class PriorityFirst:
    """A preemptive policy for the wiring test: higher qos.priority first, through the real admission engine."""

    name = "priority-first"
    preemptive = True
    oracle = False

    def schedule(self, view):
        from tacc_hub.scheduler.policies.admission import admit

        return admit(view, lambda t: (-t.priority, t.submit, t.id))


async def test_preemption_requeues_keeping_place_then_resumes(env):
    store, codes, site, _ = env
    ex = FakeExecutor(gpus=2)
    ctl = Controller(store, ex, site, PriorityFirst(), codes, poll_interval=0.05)
    await ctl.start()
    try:
        low = await ctl.submit("alice", spec(env, gpus=2, qos={"preemptible": True}))
        await until(lambda: ctl.store.get(low.id).status == S.RUNNING)
        high = await ctl.submit("bob", spec(env, gpus=2, qos={"priority": 5}))
        await until(lambda: ctl.store.get(high.id).status == S.RUNNING)
        assert ex.cancelled == [low.id]
        back = ctl.store.get(low.id)
        assert back.status == S.PENDING and "preempted" in back.reason and back.submitted_at == low.submitted_at
        assert back.placement is None and back.started_at is None
        # a higher-priority task that is not preemptible is never preempted
        third = await ctl.submit("carol", spec(env, gpus=2, qos={"priority": 9}))
        await asyncio.sleep(0.3)
        assert ctl.store.get(third.id).status == S.PENDING and ex.cancelled == [low.id]
        ex.finish(high.id, 0)
        await until(lambda: ctl.store.get(third.id).status == S.RUNNING)
        ex.finish(third.id, 0)
        await until(lambda: ctl.store.get(low.id).status == S.RUNNING)
        relaunch = [la for la in ex.launched if la.task_id == low.id]
        assert [la.attempt for la in relaunch] == [0, 1]
    finally:
        await ctl.stop()


async def test_cancel_during_preemption_ends_cancelled(env):
    store, codes, site, _ = env

    class SlowCancel(FakeExecutor):
        async def cancel(self, task_id, state):
            await asyncio.sleep(0.3)  # the grace period
            await super().cancel(task_id, state)

    ex = SlowCancel(gpus=1)
    ctl = Controller(store, ex, site, PriorityFirst(), codes, poll_interval=0.05)
    await ctl.start()
    try:
        low = await ctl.submit("alice", spec(env, gpus=1, qos={"preemptible": True}))
        await until(lambda: ctl.store.get(low.id).status == S.RUNNING)
        high = await ctl.submit("bob", spec(env, gpus=1, qos={"priority": 5}))
        await until(lambda: low.id in ex.cancelled or ctl.live[low.id].busy)
        await ctl.cancel(ctl.store.get(low.id))  # while it is being stopped
        await until(lambda: ctl.store.get(low.id).status == S.CANCELLED)
        await until(lambda: ctl.store.get(high.id).status == S.RUNNING)
    finally:
        await ctl.stop()


async def test_fair_share_usage_is_seeded_from_the_store_at_start(env):
    store = env[0]
    now = time.time()
    store.set_group("alice", "lab")
    store.record_run(1, "alice", 4, now - 3 * 86400 - 3600, now - 3 * 86400)  # 4 GPU-hours three days ago
    store.record_run(2, "bob", 1, now - 40 * 86400 - 3600, now - 40 * 86400)  # older than the 28 days looked at
    ctl = make(env)
    await ctl.start()
    try:
        past = ctl.queue.history.past
        assert [round(u[("lab", "alice")]) for _, u in past] == [4 * 3600]
        assert all(("default", "bob") not in u for _, u in past)
        assert now - 4 * 86400 < past[0][0] < now - 3 * 86400  # the middle of the day it was used in
    finally:
        await ctl.stop()


async def test_submits_are_written_off_the_event_loop_on_a_database_file(env, tmp_path):
    import threading

    ctl = make(env)
    threads: set[str] = set()
    real = ctl.store.insert_tasks

    def spy(rows):
        threads.add(threading.current_thread().name)
        return real(rows)

    ctl.store.insert_tasks = spy  # type: ignore[method-assign]
    await ctl.start()
    try:
        recs = await asyncio.gather(*(ctl.submit("ann", spec(env)) for _ in range(5)))
        assert [r.id for r in recs] == sorted(r.id for r in recs)
        assert threads and all(t.startswith("tacc-insert") for t in threads), threads
    finally:
        await ctl.stop()
    # one shared in-memory connection: inline on the loop thread
    _, codes, site, _ = env
    mem = Store("sqlite://")
    mem.migrate()
    ctl = Controller(mem, FakeExecutor(gpus=4), site, FifoGang(), codes, poll_interval=0.05)
    await ctl.start()
    try:
        rec = await ctl.submit("ann", spec(env))
        assert mem.get(rec.id) is not None
        assert not ctl.batcher._threaded
    finally:
        await ctl.stop()
