"""A running task's time with the fake executor: deadline, SIGUSR1 warning (once, re-armed), extensions."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tacc_hub.executors import FakeExecutor
from tacc_hub.scheduler.policies import FifoGang
from tacc_hub.service.base import ApiError
from tacc_hub.service.controller import Conflict, Controller, ExecutorFailed, LimitRefused
from tacc_hub.service.recovery import EXTENDED_KEY, WARNED_KEY
from tacc_hub.service.running import extension_seconds
from tacc_hub.store import TaskStatus
from tests.unit.test_controller import env, spec, until  # noqa: F401 - env is a fixture

S = TaskStatus


class SignalFake(FakeExecutor):
    """Records signals and time-limit changes; ``refuse_limit`` makes set_time_limit fail (as scontrol may)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.signals: list[tuple[int, str]] = []
        self.limits: list[tuple[int, int]] = []
        self.refuse_limit: str | None = None
        self.refuse_signal = False

    async def signal(self, task_id: int, state: dict[str, Any], signame: str) -> None:
        if self.refuse_signal:
            raise RuntimeError("no such process")
        self.signals.append((task_id, signame))

    async def set_time_limit(self, task_id: int, state: dict[str, Any], seconds: int) -> None:
        if self.refuse_limit:
            raise RuntimeError(self.refuse_limit)
        self.limits.append((task_id, seconds))


def make(env, ex: FakeExecutor) -> Controller:  # noqa: F811
    store, codes, site, _ = env
    return Controller(store, ex, site, FifoGang(), codes, poll_interval=0.02)


def timed(env, limit: int = 3600, warn: int = 60, gpus: int = 1):  # noqa: F811
    return spec(env, gpus=gpus, resources={"gpus_per_node": gpus, "time_limit": limit}, qos={"warn_before": warn})


async def test_deadline_and_warning_once_rearmed_by_extend(env) -> None:  # noqa: F811
    ex = SignalFake(gpus=2)
    ctl = make(env, ex)
    await ctl.start()
    try:
        before = time.time()
        rec = await ctl.submit("alice", timed(env))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        launch = ex.launched[0]
        assert launch.deadline is not None and before + 3600 <= launch.deadline <= time.time() + 3600
        live = ctl.live[rec.id]
        start = live.started_at
        info = ctl.time_info(ctl.store.get(rec.id))
        assert info["time_limit"] == 3600 and info["deadline"] == start + 3600 and 3590 < info["time_left"] <= 3600
        ctl.warn_deadlines(now=start + 3539)  # not yet: the warning is due at deadline - 60 s
        assert WARNED_KEY not in live.state and ex.signals == []
        ctl.warn_deadlines(now=start + 3540)
        ctl.warn_deadlines(now=start + 3541)
        await until(lambda: ex.signals == [(rec.id, "USR1")])
        ctl.warn_deadlines(now=start + 3599)
        assert ctl.store.get(rec.id).executor_state[WARNED_KEY] == 3600  # remembered: no second warning
        # An extension moves the deadline and re-arms the warning, at the new deadline - 60 s.
        done = await ctl.extend(ctl.store.get(rec.id), 600, "alice", max_time_limit=7 * 86400)
        assert done.executor_state[EXTENDED_KEY] == 600 and ex.limits == [(rec.id, 4200)]
        assert ctl.time_info(done)["time_limit"] == 4200 and ctl.time_info(done)["deadline"] == start + 4200
        ctl.warn_deadlines(now=start + 3600)
        assert len(ex.signals) == 1
        ctl.warn_deadlines(now=start + 4140)
        await until(lambda: len(ex.signals) == 2)
        assert ctl.store.extensions([rec.id]) == {rec.id: 600}
        audit = ctl.store.audit(task_id=rec.id)
        assert [(a.actor, a.action, a.detail) for a in audit] == [
            ("alice", "extend", {"seconds": 600, "before": 3600, "after": 4200})]
    finally:
        await ctl.stop()
    # A restart of the service keeps the run's extension and does not warn again.
    ex2 = SignalFake(gpus=2)
    ex2.results[rec.id] = ex.results[rec.id]
    ctl2 = make(env, ex2)
    await ctl2.start()
    try:
        live = ctl2.live[rec.id]
        assert live.limit == 4200
        ctl2.warn_deadlines(now=live.started_at + 4150)
        assert ex2.signals == []
    finally:
        await ctl2.stop()


async def test_no_warning_when_warn_before_is_not_after_start(env) -> None:  # noqa: F811
    """A limit of 60 s with the default warn_before (300 s): no SIGUSR1 (it would kill a task at its start)."""
    ex = SignalFake(gpus=2)
    ctl = make(env, ex)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, resources={"time_limit": 60}))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        ctl.warn_deadlines(now=ctl.live[rec.id].started_at + 59)
        assert ex.signals == []
    finally:
        await ctl.stop()


async def test_a_failed_signal_is_not_fatal(env, caplog) -> None:  # noqa: F811
    ex = SignalFake(gpus=2)
    ex.refuse_signal = True
    ctl = make(env, ex)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", timed(env))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        ctl.warn_deadlines(now=ctl.live[rec.id].started_at + 3550)
        await until(lambda: "could not be sent" in caplog.text)
        assert ctl.store.get(rec.id).status == S.RUNNING
    finally:
        await ctl.stop()


async def test_extended_run_is_killed_at_its_new_limit_only(env) -> None:  # noqa: F811
    ex = SignalFake(gpus=2)
    ctl = make(env, ex)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", timed(env, limit=5, warn=5))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        await ctl.extend(ctl.store.get(rec.id), 60, "alice", max_time_limit=3600)
        ctl.live[rec.id].started_at -= 30  # 30 s in: past the plan's limit, within the extended one
        ctl.enforce_time_limits()
        assert ctl.store.get(rec.id).status == S.RUNNING
        ctl.live[rec.id].started_at -= 40
        await until(lambda: ctl.store.get(rec.id).status == S.FAILED)
        done = ctl.store.get(rec.id)
        assert done.reason == "time limit of 65 s reached"
        assert [a.outcome for a in ctl.store.attempts(rec.id)] == ["time_limit"]
    finally:
        await ctl.stop()


async def test_extend_refusals_name_the_limit(env) -> None:  # noqa: F811
    ex = SignalFake(gpus=2)
    ctl = make(env, ex)
    store = env[0]
    await ctl.start()
    try:
        rec = await ctl.submit("alice", timed(env, limit=600, gpus=2))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        with pytest.raises(LimitRefused) as over:
            await ctl.extend(ctl.store.get(rec.id), 3600, "alice", max_time_limit=3000)
        assert over.value.field == "seconds" and "max_time_limit of 3000 s" in over.value.message
        assert "at most 2400 s" in over.value.message
        # A budget of 1 GPU-hour: 2 GPUs for 1 more hour need 2.
        store.set_quota("user", "alice", max_gpus=None, gpu_hours=1.0)
        ctl.quotas_changed()
        with pytest.raises(LimitRefused) as budget:
            await ctl.extend(ctl.store.get(rec.id), 3600, "alice", max_time_limit=86400)
        msg = budget.value.message
        assert budget.value.field == "seconds" and "user alice's budget of 1 GPU-hours" in msg, msg
        assert "needs 2.00 GPU-hours" in msg and "GPU-hours left" in msg, msg
        store.set_quota("group", "default", max_gpus=None, gpu_hours=0.5)
        store.set_quota("user", "alice", max_gpus=None, gpu_hours=None)
        ctl.quotas_changed()
        with pytest.raises(LimitRefused, match=r"group default.s budget of 0\.5 GPU-hours"):
            await ctl.extend(ctl.store.get(rec.id), 3600, "alice", max_time_limit=86400)
        # The cluster refuses: nothing recorded.
        store.set_quota("group", "default", max_gpus=None, gpu_hours=None)
        ctl.quotas_changed()
        ex.refuse_limit = "scontrol: error: Invalid job id"
        with pytest.raises(ExecutorFailed, match="Invalid job id"):
            await ctl.extend(ctl.store.get(rec.id), 60, "alice", max_time_limit=86400)
        assert ctl.store.extensions([rec.id]) == {} and ctl.live[rec.id].limit == 600
        assert ctl.store.audit(task_id=rec.id) == []
        # Not running: 409.
        ex.finish(rec.id, 0)
        await until(lambda: ctl.store.get(rec.id).status == S.SUCCEEDED)
        with pytest.raises(Conflict, match="is succeeded, not running"):
            await ctl.extend(ctl.store.get(rec.id), 60, "alice", max_time_limit=86400)
    finally:
        await ctl.stop()


async def test_a_restarted_run_starts_from_the_plans_limit(env) -> None:  # noqa: F811
    ex = SignalFake(gpus=2)
    store, codes, site, _ = env
    ctl = Controller(store, ex, site, FifoGang(), codes, poll_interval=0.02, restart_backoff=0.01)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, resources={"time_limit": 600}, qos={"max_restarts": 1}))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        await ctl.extend(ctl.store.get(rec.id), 300, "alice", max_time_limit=86400)
        assert ctl.time_info(ctl.store.get(rec.id))["time_limit"] == 900
        ex.finish(rec.id, 1)
        await until(lambda: len(ex.launched) == 2 and ctl.store.get(rec.id).status == S.RUNNING)
        assert ctl.live[rec.id].limit == 600 and EXTENDED_KEY not in ctl.store.get(rec.id).executor_state
        assert ex.launched[1].deadline is not None and ex.launched[1].deadline <= time.time() + 600
    finally:
        await ctl.stop()


@pytest.mark.parametrize(("body", "field", "text"), [
    ({"seconds": 59}, "seconds", "at least 60"),
    ({"seconds": True}, "seconds", "whole number"),
    ({"seconds": 60.0}, "seconds", "whole number"),
    ({"seconds": "3600"}, "seconds", "whole number"),
    ({"by": 3600}, "by", "duration"),
    ({"by": "1x"}, "by", "not a time limit"),
    ({"by": "1h", "seconds": 60}, "seconds", "exactly one"),
    ({}, "seconds", "exactly one"),
    ([], "body", "JSON object"),
    ({"seconds": 60, "user": "bob"}, "user", "unknown field"),
    ({"seconds": 10**30}, "seconds", "max_time_limit of 604800 s"),
])
def test_extension_body_is_checked(body, field, text) -> None:
    with pytest.raises(ApiError) as err:
        extension_seconds(body, 7 * 86400)
    assert err.value.status_code == 422 and err.value.errors[0]["field"] == field
    assert text in err.value.message, err.value.message


def test_extension_body_durations() -> None:
    assert extension_seconds({"by": "1h"}, 86400) == 3600
    assert extension_seconds({"by": "30m"}, 86400) == 1800
    assert extension_seconds({"by": "1:30:00"}, 86400) == 5400
    assert extension_seconds({"seconds": 600}, 86400) == 600


async def test_a_task_killed_by_its_warning_is_not_restarted(env) -> None:  # noqa: F811
    """SIGUSR1 not handled (exit 138 after the warning): its run ends as its time limit would, no restart."""
    ex = SignalFake(gpus=2)
    store, codes, site, _ = env
    ctl = Controller(store, ex, site, FifoGang(), codes, poll_interval=0.02, restart_backoff=0.01)
    await ctl.start()
    try:
        rec = await ctl.submit("alice", spec(env, resources={"time_limit": 3600},
                                             qos={"max_restarts": 2, "warn_before": 60}))
        await until(lambda: ctl.store.get(rec.id).status == S.RUNNING)
        ctl.warn_deadlines(now=ctl.live[rec.id].started_at + 3545)
        await until(lambda: len(ex.signals) == 1)
        ex.finish(rec.id, 138)
        await until(lambda: ctl.store.get(rec.id).status == S.FAILED)
        done = ctl.store.get(rec.id)
        assert done.reason.startswith("ended by SIGUSR1, its warning 60 s before its time limit of 3600 s"), done.reason
        assert len(ex.launched) == 1 and [a.outcome for a in ctl.store.attempts(rec.id)] == ["time_limit"]
        # Without a warning sent, exit 138 is a failure like any other (restarted).
        again = await ctl.submit("alice", spec(env, qos={"max_restarts": 1}))
        await until(lambda: ctl.store.get(again.id).status == S.RUNNING)
        ex.finish(again.id, 138)
        await until(lambda: len(ex.launched) == 3)
    finally:
        await ctl.stop()


def test_tcloud_show_lines_for_time_and_gpu_use() -> None:
    """`tcloud show`'s time line, and its efficiency line (left out when the usage endpoint answers 404 or
    has no samples)."""
    from rich.console import Console

    from tacc_hub.cli import tcloud as cli
    from tacc_hub.client import ApiClientError

    class Client:
        def __init__(self, usage: Any) -> None:
            self._usage = usage

        def usage(self, task_id: int) -> Any:
            if isinstance(self._usage, Exception):
                raise self._usage
            return self._usage

    def out(usage: Any) -> str:
        con = Console(record=True, width=200)
        cli._show_usage(con, Client(usage), {"id": 1})
        return con.export_text()

    samples = [{"at": i, "util": 37.0, "memory_mib": None, "gpus": 2} for i in range(12)]
    assert out({"gpus": 2, "samples": samples, "mean_util": 37.2}) == \
        "GPU utilization: mean 37% over 2 GPUs (12 samples)\n"
    assert out({"gpus": 2, "samples": [], "mean_util": None}) == ""
    assert out(ApiClientError(404, "no task 1")) == ""
    con = Console(record=True, width=200)
    cli._show_time(con, {"status": "running", "time_limit": 3900, "deadline": 0, "time_left": 300,
                         "max_restarts": 2})
    assert con.export_text() == ("time limit: 1:05:00; deadline 1970-01-01 00:00:00 UTC; 0:05:00 left; "
                                 "restarts: at most 2\n")
    assert cli._time_left({"status": "running", "time_left": 3900}) == "1h05m"
    assert cli._time_left({"status": "running", "time_left": 240}) == "ends in 4m"
    assert cli._time_left({"status": "pending", "time_left": None}) == "-"
