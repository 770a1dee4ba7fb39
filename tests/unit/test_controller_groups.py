"""The controller's arrays, pipelines and dependencies, with the fake executor: gates, cascades, recovery."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from tacc_hub.compiler import SiteProfile, compile_task
from tacc_hub.executors import FakeExecutor, Observation
from tacc_hub.scheduler.policies import FifoGang
from tacc_hub.schema import SpecError, spec_from_data
from tacc_hub.schema.pipeline import PipelineSpec
from tacc_hub.service.controller import Controller
from tacc_hub.service.groups import NotFound
from tacc_hub.snapshot import CodeStore, digest_of, pack
from tacc_hub.store import Store, TaskStatus

S = TaskStatus
ACTIVE_RUN = (S.STARTING, S.RUNNING, S.CANCELLING)


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


def make(env, executor=None, cap=None):
    store, codes, site, _ = env
    return Controller(store, executor or FakeExecutor(gpus=4), site, FifoGang(), codes, poll_interval=0.02,
                      max_running_per_user=cap)


def data(env, name="t", gpus=0, **kw):
    return {"name": name, "code": {"kind": "snapshot", "digest": env[3]},
            "entrypoint": {"argv": ["python", "a.py"]}, "resources": {"gpus_per_node": gpus}, **kw}


def spec(env, name="t", gpus=0, **kw):
    return spec_from_data(data(env, name, gpus, **kw))


async def until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def status(ctl, tid):
    return ctl.store.get(tid).status


def watch_max_running(ctl, array_id, limit):
    """Check after every tick that the array never has more than ``limit`` elements admitted or running."""
    seen = {"max": 0, "ticks": 0}
    tick = ctl.tick

    async def checked():
        await tick()
        recs = ctl.store.array_tasks(array_id)
        running = [r for r in recs if r.status in ACTIVE_RUN]
        admitted = [r for r in recs if r.id in ctl.queue.waiting or r.id in ctl.live]
        assert len(running) <= limit and len(admitted) <= limit, (len(running), len(admitted))
        seen["max"] = max(seen["max"], len(running))
        seen["ticks"] += 1

    ctl.tick = checked
    return seen


async def finish_all_running(ctl, ex, ids, code=0):
    """Finish every element the executor runs now, one round; returns how many."""
    n = 0
    for tid in ids:
        if ctl.store.get(tid).status == S.RUNNING and ex.results.get(tid) == Observation("running"):
            ex.finish(tid, code)
            n += 1
    return n


async def test_array_honours_max_running_over_a_whole_run(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        arr, recs = await ctl.submit_array("alice", spec(env, gpus=1, array="0-19%3"))
        ids = [r.id for r in recs]
        assert arr.id == ids[0] and arr.size == 20 and arr.max_running == 3
        assert [r.array_index for r in recs] == list(range(20))
        seen = watch_max_running(ctl, arr.id, 3)
        while any(status(ctl, t) != S.SUCCEEDED for t in ids):
            await until(lambda: any(status(ctl, t) == S.RUNNING for t in ids)
                        or all(status(ctl, t) == S.SUCCEEDED for t in ids))
            await finish_all_running(ctl, ex, ids)
            await asyncio.sleep(0.03)
        assert seen["max"] == 3 and seen["ticks"] > 5
        assert all(status(ctl, t) == S.SUCCEEDED for t in ids)
        order = [la.task_id for la in ex.launched]
        assert order == ids  # lowest index first
        assert {la.array_id for la in ex.launched} == {arr.id}
        summary = ctl.array_summary(arr)
        assert summary["status"] == "succeeded" and summary["done"] == 20 and summary["counts"] == {"succeeded": 20}
        assert not ctl.arrays and not ctl.gated and not ctl.element_of
    finally:
        await ctl.stop()


async def test_array_elements_are_compiled_each_as_alone(env):
    ctl = make(env)
    await ctl.start()
    try:
        s = spec_from_data({**data(env), "entrypoint": {"argv": ["python", "a.py", "--lr", "{lr}"]},
                            "array": {"grid": {"lr": [0.1, "$(rm -rf /)"], "bs": [1, 2]}}})
        _, recs = await ctl.submit_array("alice", s)
        from tacc_hub.schema.arrays import expand

        site = ctl._site_for("alice")
        for el, rec in zip(expand(s), recs, strict=True):
            stored = ctl.store.get(rec.id)
            assert stored.plan == compile_task(el, site).model_dump(mode="json")
            assert stored.digest == el.digest
        assert ctl.store.get(recs[2].id).spec["entrypoint"]["argv"][-1] == "$(rm -rf /)"
        assert len({r.digest for r in recs}) == 4
    finally:
        await ctl.stop()


async def test_cancel_array_cancels_every_element_not_ended(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        arr, recs = await ctl.submit_array("alice", spec(env, gpus=1, array="0-9%2"))
        ids = [r.id for r in recs]
        await until(lambda: status(ctl, ids[0]) == S.RUNNING and status(ctl, ids[1]) == S.RUNNING)
        ex.finish(ids[0], 0)
        await until(lambda: status(ctl, ids[2]) == S.RUNNING)
        n = await ctl.cancel_array(arr.id)
        assert n == 9
        await until(lambda: all(status(ctl, t).is_terminal() for t in ids))
        assert status(ctl, ids[0]) == S.SUCCEEDED
        assert all(status(ctl, t) == S.CANCELLED for t in ids[1:])
        assert sorted(ex.cancelled) == [ids[1], ids[2]]  # the waiting ones never reached the executor
        assert [la.task_id for la in ex.launched] == ids[:3]
        assert ctl.store.get(ids[5]).reason == "cancelled before it started"
        assert not ctl.gated and not ctl.queue.waiting and arr.id not in ctl.arrays
        assert ctl.array_summary(arr)["status"] == "cancelled"
        assert await ctl.cancel_array(arr.id) == 0
    finally:
        await ctl.stop()


async def test_dependency_succeeded_finished_failed(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        a = await ctl.submit("alice", spec(env, "prepare"))
        ok = await ctl.submit("alice", spec(env, "ok", depends_on=[{"task": a.id}]))
        any_ = await ctl.submit("alice", spec(env, "any", depends_on=[{"task": a.id, "when": "finished"}]))
        bad = await ctl.submit("alice", spec(env, "bad", depends_on=[{"task": a.id, "when": "failed"}]))
        assert {ok.id, any_.id, bad.id} <= set(ctl.gated)
        assert ctl.reason_for(ctl.store.get(ok.id)) == f"Dependency: waits for task {a.id} (prepare) to succeed"
        assert ctl.queue_info(ctl.store.get(bad.id)).detail == f"waits for task {a.id} (prepare) to fail"
        assert ctl.status_of(ok.id) == S.PENDING
        await until(lambda: status(ctl, a.id) == S.RUNNING)
        await asyncio.sleep(0.1)
        assert all(status(ctl, t) == S.PENDING for t in (ok.id, any_.id, bad.id))  # still waiting
        ex.finish(a.id, 0)
        await until(lambda: status(ctl, ok.id) == S.RUNNING and status(ctl, any_.id) == S.RUNNING)
        assert status(ctl, bad.id) == S.CANCELLED
        assert ctl.store.get(bad.id).reason == f"dependency can never be met: task {a.id} (prepare) succeeded"
        # afternotok: met by a failure
        b = await ctl.submit("alice", spec(env, "b"))
        after_fail = await ctl.submit("alice", spec(env, "c", depends_on=[{"task": b.id, "when": "failed"}]))
        await until(lambda: status(ctl, b.id) == S.RUNNING)
        ex.finish(b.id, 3)
        await until(lambda: status(ctl, after_fail.id) == S.RUNNING)
        assert not ctl.waiters
    finally:
        await ctl.stop()


async def test_unmet_dependency_cancels_in_cascade_with_the_first_cause(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        a = await ctl.submit("alice", spec(env, "prepare"))
        b = await ctl.submit("alice", spec(env, "train", depends_on=[{"task": a.id}]))
        c = await ctl.submit("alice", spec(env, "evaluate", depends_on=[{"task": b.id}]))
        d = await ctl.submit("alice", spec(env, "report", depends_on=[{"task": c.id, "when": "finished"}]))
        await until(lambda: status(ctl, a.id) == S.RUNNING)
        ex.finish(a.id, 1)
        await until(lambda: status(ctl, c.id) == S.CANCELLED)
        assert ctl.store.get(b.id).reason == f"dependency can never be met: task {a.id} (prepare) failed"
        assert ctl.store.get(c.id).reason == (f"dependency can never be met: task {b.id} (train) was cancelled, as "
                                               f"task {a.id} (prepare) failed")
        # finished is met by the cancel: it runs
        await until(lambda: status(ctl, d.id) == S.RUNNING)
        # a cancel by its owner is a cause too
        e = await ctl.submit("alice", spec(env, "e", gpus=4))
        f = await ctl.submit("alice", spec(env, "f", gpus=4))
        g = await ctl.submit("alice", spec(env, "g", depends_on=[{"task": f.id}]))
        await ctl.cancel(ctl.store.get(f.id))
        assert status(ctl, g.id) == S.CANCELLED
        assert ctl.store.get(g.id).reason == f"dependency can never be met: task {f.id} (f) cancelled"
        assert e.id and not ctl.gated
    finally:
        await ctl.stop()


async def test_dependency_refusals(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        theirs = await ctl.submit("bob", spec(env))
        with pytest.raises(NotFound) as err:
            await ctl.submit("alice", spec(env, depends_on=[{"task": theirs.id}]))
        assert err.value.field == "depends_on[0].task"
        with pytest.raises(NotFound):
            await ctl.submit("alice", spec(env, depends_on=[{"task": 999999}]))
        with pytest.raises(NotFound) as err:
            await ctl.submit("alice", spec(env, inputs=[{"task": theirs.id, "path": "out"}]))
        assert err.value.field == "inputs[0].task"
        arr, _ = await ctl.submit_array("bob", spec(env, array=[1, 2]))
        with pytest.raises(NotFound) as err:
            await ctl.submit_array("alice", spec(env, array=[1, 2], depends_on=[{"array": arr.id}]))
        assert err.value.field == "depends_on[0].array"
        with pytest.raises(SpecError, match="pipeline"):
            await ctl.submit("alice", spec(env, inputs=[{"from": "prepare", "path": "out"}]))
        with pytest.raises(SpecError):
            await ctl.submit("alice", spec(env, array="0-3"))
        mine = await ctl.submit("alice", spec(env, "mine"))
        await until(lambda: status(ctl, mine.id) == S.RUNNING)
        ex.finish(mine.id, 2)
        await until(lambda: status(ctl, mine.id) == S.FAILED)
        with pytest.raises(SpecError) as err:
            await ctl.submit("alice", spec(env, depends_on=[{"task": mine.id, "when": "finished"},
                                                            {"task": mine.id}]))
        assert err.value.errors[0][0] == "depends_on[1]"
        assert f"task {mine.id} (mine) failed" in err.value.errors[0][1]
        n = ctl.store.list_tasks(None, None, 100, None)[1]
        ok = await ctl.submit("alice", spec(env, depends_on=[{"task": mine.id, "when": "failed"}]))
        assert ctl.store.list_tasks(None, None, 100, None)[1] == n + 1
        await until(lambda: status(ctl, ok.id) == S.RUNNING)  # already met: queued at once
    finally:
        await ctl.stop()


async def test_explanations_of_an_array(env):
    ex = FakeExecutor(gpus=1)
    ctl = make(env, ex)
    await ctl.start()
    try:
        blocker = await ctl.submit("alice", spec(env, "blocker", gpus=1))
        await until(lambda: status(ctl, blocker.id) == S.RUNNING)
        arr, recs = await ctl.submit_array("alice", spec(env, "sweep", gpus=1, array="0-4%2"))
        ids = [r.id for r in recs]
        await asyncio.sleep(0.1)
        first, last = ctl.store.get(ids[0]), ctl.store.get(ids[4])
        assert ctl.queue_info(last).reason == "ArrayLimit"
        assert ctl.queue_info(last).detail == "2 of 5 running (max_running 2)"
        assert ctl.reason_for(last) == "0 of 5 running, 5 waiting: ArrayLimit: 2 of 5 running (max_running 2)"
        assert ctl.reason_for(first).startswith("0 of 5 running, 5 waiting: ")
        assert ctl.queue_info(first).reason != "ArrayLimit"
        summary = ctl.array_summary(arr)
        assert summary["status"] == "pending" and summary["waiting"] == 5
        assert summary["reason"].startswith("0 of 5 running, 5 waiting: ")
        ex.finish(blocker.id, 0)
        await until(lambda: status(ctl, ids[0]) == S.RUNNING)
        ctl._progress.clear()
        summary = ctl.array_summary(arr)
        assert summary["status"] == "running" and summary["running"] == 1
        assert summary["reason"].startswith("1 of 5 running, 4 waiting: ")
        assert ctl.reason_for(ctl.store.get(ids[3])).startswith("1 of 5 running, 4 waiting: ArrayLimit")
    finally:
        await ctl.stop()


async def test_array_dependencies(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        arr, recs = await ctl.submit_array("alice", spec(env, "sweep", array=[1, 2, 3]))
        ids = [r.id for r in recs]
        all_ok = await ctl.submit("alice", spec(env, "all", depends_on=[{"array": arr.id}]))
        first = await ctl.submit("alice", spec(env, "first", depends_on=[{"array": arr.id, "when": "any_finished"}]))
        done = await ctl.submit("alice", spec(env, "done", depends_on=[{"array": arr.id, "when": "all_finished"}]))
        assert ctl.queue_info(ctl.store.get(all_ok.id)).detail == \
            f"waits for array {arr.id} (sweep): all 3 elements to succeed (0 done)"
        await until(lambda: all(status(ctl, t) == S.RUNNING for t in ids))
        ex.finish(ids[0], 0)
        await until(lambda: status(ctl, first.id) == S.RUNNING)
        assert status(ctl, all_ok.id) == S.PENDING and status(ctl, done.id) == S.PENDING
        ex.finish(ids[1], 1)
        await until(lambda: status(ctl, all_ok.id) == S.CANCELLED)
        assert ctl.store.get(all_ok.id).reason == \
            f"dependency can never be met: array {arr.id} (sweep): 1 of 3 elements did not succeed (element 1, " \
            f"task {ids[1]}: failed)"
        assert status(ctl, done.id) == S.PENDING
        ex.finish(ids[2], 0)
        await until(lambda: status(ctl, done.id) == S.RUNNING)
        assert not ctl.waiters and not ctl._any_waiters and not ctl.gated
    finally:
        await ctl.stop()


def pipeline(env, fail_first=False):
    return PipelineSpec.model_validate({"name": "pipe", "steps": [
        {"name": "prepare", "spec": data(env, "prepare")},
        {"name": "train", "needs": ["prepare"],
         "spec": {**data(env, "train"), "array": "0-2%2",
                  "inputs": [{"from": "prepare", "path": "outputs/data"}]}},
        {"name": "evaluate", "needs": ["train"],
         "spec": {**data(env, "evaluate"), "inputs": [{"from": "train", "path": "outputs/model", "to": "models"}]}},
    ]})


async def test_pipeline_runs_in_order_and_passes_ids(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        p, recs = await ctl.submit_pipeline("alice", pipeline(env))
        prep, train, ev = recs[0], recs[1:4], recs[4]
        assert p.id == prep.id and [s["name"] for s in p.steps] == ["prepare", "train", "evaluate"]
        tid = train[0].array_id
        def inputs(rec):
            return [{k: v for k, v in i.items() if v is not None} for i in ctl.store.get(rec.id).spec["inputs"]]

        assert inputs(train[1]) == [{"task": prep.id, "path": "outputs/data"}]
        assert inputs(ev) == [{"array": tid, "path": "outputs/model", "to": "models"}]
        plan_inputs = ctl.store.get(ev.id).plan["inputs"]
        assert [tuple(x) for x in plan_inputs[0]["tasks"]] == [(i, r.id) for i, r in enumerate(train)]
        assert ctl.store.get(train[0].id).plan["inputs"][0]["task"] == prep.id
        assert all(r.pipeline_id == p.id for r in recs)
        summary = ctl.pipeline_summary(p)
        assert summary["status"] == "pending"
        assert summary["steps"][2]["reason"] == \
            f"Dependency: waits for array {tid} (train): all 3 elements to succeed (0 done)"
        await until(lambda: status(ctl, prep.id) == S.RUNNING)
        assert ctl.pipeline_summary(p)["status"] == "running"
        ex.finish(prep.id, 0)
        await until(lambda: status(ctl, train[1].id) == S.RUNNING)
        assert status(ctl, train[2].id) == S.PENDING  # max_running 2
        for t in train:
            await until(lambda t=t: status(ctl, t.id) == S.RUNNING)
            ex.finish(t.id, 0)
        await until(lambda: status(ctl, ev.id) == S.RUNNING)
        ex.finish(ev.id, 0)
        await until(lambda: status(ctl, ev.id) == S.SUCCEEDED)
        summary = ctl.pipeline_summary(p)
        assert summary["status"] == "succeeded"
        assert [s["status"] for s in summary["steps"]] == ["succeeded"] * 3
        assert summary["steps"][1]["array_id"] == tid and summary["steps"][0]["task_id"] == prep.id
    finally:
        await ctl.stop()


async def test_pipeline_first_step_fails_the_rest_cancelled(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        p, recs = await ctl.submit_pipeline("alice", pipeline(env))
        prep = recs[0]
        await until(lambda: status(ctl, prep.id) == S.RUNNING)
        ex.finish(prep.id, 1)
        await until(lambda: all(status(ctl, r.id) == S.CANCELLED for r in recs[1:]))
        for r in recs[1:]:
            assert f"task {prep.id} (prepare) failed" in ctl.store.get(r.id).reason
        assert ctl.pipeline_summary(p)["status"] == "failed"
        assert not ctl.gated and not ctl.waiters and not ctl.arrays
        # cancel_pipeline on a new one: everything ends, the running step through the executor
        p2, recs2 = await ctl.submit_pipeline("alice", pipeline(env))
        await until(lambda: status(ctl, recs2[0].id) == S.RUNNING)
        assert await ctl.cancel_pipeline(p2.id) == 5
        await until(lambda: all(status(ctl, r.id) == S.CANCELLED for r in recs2))
        assert ctl.pipeline_summary(p2)["status"] == "cancelled"
    finally:
        await ctl.stop()


async def test_pipeline_refusals_store_nothing(env):
    ctl = make(env)
    await ctl.start()
    try:
        bad = PipelineSpec.model_validate({"name": "pipe", "steps": [
            {"name": "a", "spec": data(env, "a")},
            {"name": "b", "needs": ["a"], "spec": data(env, "b", gpus=8)}]})
        with pytest.raises(SpecError) as err:
            await ctl.submit_pipeline("alice", bad)
        assert err.value.errors[0][0].startswith("steps[1].spec.resources")
        theirs = await ctl.submit("bob", spec(env))
        other = PipelineSpec.model_validate({"name": "pipe", "steps": [
            {"name": "a", "spec": data(env, "a", depends_on=[{"task": theirs.id}])}]})
        with pytest.raises(NotFound) as nf:
            await ctl.submit_pipeline("alice", other)
        assert nf.value.field == "steps[0].spec.depends_on[0].task"
        assert ctl.store.list_tasks("alice", None, 10, None)[1] == 0
        assert ctl.store.list_pipelines(None) == []
    finally:
        await ctl.stop()


async def test_recovery_rebuilds_gates_and_everything_completes(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    arr, recs = await ctl.submit_array("alice", spec(env, "sweep", gpus=1, array="0-5%2"))
    ids = [r.id for r in recs]
    a = await ctl.submit("alice", spec(env, "a"))
    b = await ctl.submit("alice", spec(env, "b", depends_on=[{"task": a.id}]))
    c = await ctl.submit("alice", spec(env, "c", depends_on=[{"task": b.id}]))
    await until(lambda: status(ctl, ids[0]) == S.RUNNING and status(ctl, ids[1]) == S.RUNNING
                and status(ctl, a.id) == S.RUNNING)
    ex.finish(ids[0], 0)
    await until(lambda: status(ctl, ids[2]) == S.RUNNING)
    await ctl.stop()  # as after a kill -9: nothing but the store survives
    ex2 = FakeExecutor(gpus=4)
    for t in (ids[1], ids[2], a.id):
        ex2.results[t] = Observation("running")
    ctl2 = make(env, ex2)
    await ctl2.start()
    try:
        assert set(ctl2.gated) == {*ids[3:], b.id, c.id}
        assert ctl2.arrays[arr.id].admitted == {ids[1], ids[2]}
        assert ctl2.queue_info(ctl2.store.get(ids[3])).reason == "ArrayLimit"
        assert ctl2.queue_info(ctl2.store.get(c.id)).detail == f"waits for task {b.id} (b) to succeed"
        seen = watch_max_running(ctl2, arr.id, 2)
        ex2.finish(a.id, 0)
        await until(lambda: status(ctl2, b.id) == S.RUNNING)
        ex2.finish(b.id, 0)
        await until(lambda: status(ctl2, c.id) == S.RUNNING)
        ex2.finish(c.id, 0)
        while any(status(ctl2, t) != S.SUCCEEDED for t in ids):
            await until(lambda: any(status(ctl2, t) == S.RUNNING for t in ids)
                        or all(status(ctl2, t) == S.SUCCEEDED for t in ids))
            await finish_all_running(ctl2, ex2, ids)
            await asyncio.sleep(0.03)
        assert seen["max"] <= 2
        assert [la.task_id for la in ex2.launched if la.task_id in ids] == ids[3:]
        await until(lambda: status(ctl2, c.id) == S.SUCCEEDED)
    finally:
        await ctl2.stop()


async def test_recovery_cancels_a_dependency_that_failed_while_down(env):
    ctl = make(env)
    await ctl.start()
    a = await ctl.submit("alice", spec(env, "a", gpus=4))
    b = await ctl.submit("alice", spec(env, "b", gpus=4))
    w = await ctl.submit("alice", spec(env, "w", depends_on=[{"task": b.id}]))
    await ctl.stop()
    # b was cancelled in the store while the service was down (an admin tool, say)
    ctl.store.transition(b.id, S.CANCELLED, expected=S.PENDING, reason="cancelled")
    ctl2 = make(env)
    await ctl2.start()
    try:
        assert status(ctl2, w.id) == S.CANCELLED
        assert ctl2.store.get(w.id).reason == f"dependency can never be met: task {b.id} (b) cancelled"
        assert a.id not in ctl2.gated
    finally:
        await ctl2.stop()


async def test_preempted_element_keeps_its_slot(env):
    ex = FakeExecutor(gpus=2)
    ctl = make(env, ex)
    await ctl.start()
    try:
        arr, recs = await ctl.submit_array("alice", spec(env, gpus=1, array="0-3%1", qos={"preemptible": True}))
        ids = [r.id for r in recs]
        await until(lambda: status(ctl, ids[0]) == S.RUNNING)
        live = ctl.live[ids[0]]
        assert ctl._back_to_queue(ids[0], live, time.time(), reason="preempted", outcome="preempted")
        await asyncio.sleep(0.1)
        assert ctl.arrays[arr.id].admitted == {ids[0]}
        assert all(status(ctl, t) == S.PENDING for t in ids[1:]) and ids[1] in ctl.gated
        await until(lambda: status(ctl, ids[0]) == S.RUNNING)
        ex.finish(ids[0], 0)
        await until(lambda: status(ctl, ids[1]) == S.RUNNING)
        assert status(ctl, ids[2]) == S.PENDING
    finally:
        await ctl.stop()


async def test_submitting_a_thousand_elements_is_fast(env):
    ctl = make(env, FakeExecutor(gpus=4, nodes=4))
    await ctl.start()
    try:
        await ctl.submit_array("alice", spec(env, "warm", gpus=1, array="0-9%1"))
        t = time.perf_counter()
        arr, recs = await ctl.submit_array("alice", spec(env, gpus=1, array="0-999%10"))
        took = time.perf_counter() - t
        assert len(recs) == 1000 and len(ctl.store.array_tasks(arr.id)) == 1000
        assert took < 2.0, f"submit_array of 1,000 elements took {took:.2f} s"
        print(f"submit_array(1000): {took * 1000:.0f} ms")
        # the gated elements are not in the policy's queue: a pass is as short as with 10 waiting
        await asyncio.sleep(0.1)
        assert len([t for t in ctl.queue.waiting if t in {r.id for r in recs}]) <= 10
        t = time.perf_counter()
        ctl.schedule()
        assert time.perf_counter() - t < 0.05
    finally:
        await ctl.stop()


async def test_inputs_outside_a_pipeline_wait_for_their_producer(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        arr, recs = await ctl.submit_array("alice", spec(env, "sweep", array=[1, 2]))
        prod = await ctl.submit("alice", spec(env, "prod"))
        cons = await ctl.submit("alice", spec(env, "cons", inputs=[{"task": prod.id, "path": "out"},
                                                                   {"array": arr.id, "path": "m"}]))
        deps = ctl.store.dependencies([cons.id])[cons.id]
        assert [(d.kind, d.on_id, d.when) for d in deps] == [("task", prod.id, "finished"),
                                                             ("array", arr.id, "all_finished")]
        plan = ctl.store.get(cons.id).plan
        assert [tuple(x) for x in plan["inputs"][1]["tasks"]] == [(0, recs[0].id), (1, recs[1].id)]
        await until(lambda: status(ctl, prod.id) == S.RUNNING)
        ex.finish(prod.id, 1)  # finished, even failed: the copy may go ahead
        for r in recs:
            await until(lambda r=r: status(ctl, r.id) == S.RUNNING)
            assert status(ctl, cons.id) == S.PENDING
            ex.finish(r.id, 0)
        await until(lambda: status(ctl, cons.id) == S.RUNNING)
        # an explicit dependency on the producer is kept as given
        strict = await ctl.submit("alice", spec(env, "strict", depends_on=[{"task": cons.id}],
                                                inputs=[{"task": cons.id, "path": "out"}]))
        assert [(d.kind, d.when) for d in ctl.store.dependencies([strict.id])[strict.id]] == [("task", "succeeded")]
    finally:
        await ctl.stop()


async def test_element_held_for_a_restart_keeps_its_slot(env):
    store, codes, site, _ = env
    ex = FakeExecutor(gpus=4)
    ctl = Controller(store, ex, site, FifoGang(), codes, poll_interval=0.02, restart_backoff=0.3)
    await ctl.start()
    try:
        arr, recs = await ctl.submit_array("alice", spec(env, gpus=1, array="0-2%1", qos={"max_restarts": 1}))
        ids = [r.id for r in recs]
        await until(lambda: status(ctl, ids[0]) == S.RUNNING)
        ex.finish(ids[0], 5)
        await until(lambda: ids[0] in ctl.held)
        assert ctl.arrays[arr.id].admitted == {ids[0]}
        await asyncio.sleep(0.1)
        assert status(ctl, ids[1]) == S.PENDING and ids[1] in ctl.gated
        await until(lambda: status(ctl, ids[0]) == S.RUNNING and len(ex.launched) == 2)
        assert status(ctl, ids[1]) == S.PENDING
        ex.finish(ids[0], 0)
        await until(lambda: status(ctl, ids[1]) == S.RUNNING)
        assert status(ctl, ids[2]) == S.PENDING
    finally:
        await ctl.stop()


async def test_a_failed_dependency_cancels_a_whole_array_at_once(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    await ctl.start()
    try:
        a = await ctl.submit("alice", spec(env, "prepare"))
        arr, _ = await ctl.submit_array("alice", spec(env, "sweep", array="0-299%4", depends_on=[{"task": a.id}]))
        after = await ctl.submit("alice", spec(env, "report", depends_on=[{"array": arr.id}]))
        assert len(ctl.gated) == 301
        await until(lambda: status(ctl, a.id) == S.RUNNING)
        ex.finish(a.id, 1)
        await until(lambda: status(ctl, after.id) == S.CANCELLED)
        assert ctl.array_summary(arr)["counts"] == {"cancelled": 300}
        assert {r.reason for r in ctl.store.array_tasks(arr.id)} == {
            f"dependency can never be met: task {a.id} (prepare) failed"}
        assert ctl.store.get(after.id).reason == (f"dependency can never be met: array {arr.id} (sweep): 300 of 300 "
                                                  f"elements did not succeed, as task {a.id} (prepare) failed")
        assert not ctl.gated and not ctl.waiters and not ctl.arrays and not ex.launched[1:]
    finally:
        await ctl.stop()


async def test_quota_applies_per_element_not_to_the_array_total(env):
    ex = FakeExecutor(gpus=4)
    ctl = make(env, ex)
    ctl.store.set_quota("user", "alice", max_gpus=2, gpu_hours=None)
    await ctl.start()
    try:
        with pytest.raises(SpecError, match="over quota"):
            await ctl.submit_array("alice", spec(env, gpus=3, array=[1, 2]))
        arr, recs = await ctl.submit_array("alice", spec(env, gpus=1, array="0-5"))  # 6 GPUs in all: accepted
        ids = [r.id for r in recs]
        await until(lambda: sum(status(ctl, t) == S.RUNNING for t in ids) == 2)
        await asyncio.sleep(0.1)
        assert sum(status(ctl, t) == S.RUNNING for t in ids) == 2  # the quota holds the rest
        assert ctl.queue_info(ctl.store.get(ids[5])).reason == "Quota"
        while any(status(ctl, t) != S.SUCCEEDED for t in ids):
            await until(lambda: any(status(ctl, t) == S.RUNNING for t in ids)
                        or all(status(ctl, t) == S.SUCCEEDED for t in ids))
            await finish_all_running(ctl, ex, ids)
            await asyncio.sleep(0.03)
        assert ctl.array_summary(arr)["status"] == "succeeded"
    finally:
        await ctl.stop()


async def test_recovery_gives_free_slots_to_the_lowest_indexes(env):
    ex = FakeExecutor(gpus=1)
    ctl = make(env, ex)
    await ctl.start()
    blocker = await ctl.submit("alice", spec(env, "blocker", gpus=1))
    await until(lambda: status(ctl, blocker.id) == S.RUNNING)
    arr, recs = await ctl.submit_array("alice", spec(env, "sweep", gpus=1, array="0-5%2"))
    ids = [r.id for r in recs]
    later, _ = await ctl.submit_array("alice", spec(env, "later", gpus=1, array="0-2", depends_on=[{"task": ids[5]}]))
    await ctl.stop()
    ex2 = FakeExecutor(gpus=1)
    ex2.results[blocker.id] = Observation("running")
    ctl2 = make(env, ex2)
    await ctl2.start()
    try:
        assert set(ids[:2]) <= set(ctl2.queue.waiting) and not set(ids[2:]) & set(ctl2.queue.waiting)
        assert ctl2.arrays[arr.id].admitted == set(ids[:2])
        assert all(ctl2.queue_info(ctl2.store.get(t)).reason == "Dependency" for t in range(later.id, later.id + 3))
        seen = watch_max_running(ctl2, arr.id, 2)
        ex2.finish(blocker.id, 0)
        for t in ids:
            await until(lambda t=t: status(ctl2, t) == S.RUNNING)
            ex2.finish(t, 0)
        for t in range(later.id, later.id + 3):
            await until(lambda t=t: status(ctl2, t) == S.RUNNING)
            ex2.finish(t, 0)
        assert seen["max"] <= 2
        assert [la.task_id for la in ex2.launched] == [*ids, later.id, later.id + 1, later.id + 2]
    finally:
        await ctl2.stop()
