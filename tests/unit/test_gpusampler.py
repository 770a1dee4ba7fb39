"""The GPU sampler with a fake executor: rows per task per pass, isolation of hanging and failing reads, pruning.

A real store (SQLite file); the controller is reduced to what the sampler reads (``live``, ``executor``).
Every wait is on a condition (rows in the store, a read started or cancelled), never a sleep.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tacc_hub.executors import FakeExecutor
from tacc_hub.scheduler.cluster import NodeSlots, Placement
from tacc_hub.service import gpusampler
from tacc_hub.service.controller import Live
from tacc_hub.service.gpusampler import GpuSampler, sample_row
from tacc_hub.service.running_settings import RunningSettings
from tacc_hub.store import Store, TaskStatus


class GpuExecutor(FakeExecutor):
    """Readings per task: a list (returned), ``"hang"`` (never answers), ``"fail"`` (raises)."""

    def __init__(self) -> None:
        super().__init__(gpus=8)
        self.behaviour: dict[int, Any] = {}
        self.calls: list[int] = []
        self.started: dict[int, asyncio.Event] = {}
        self.cancelled_reads: list[int] = []
        self.commands: set[tuple[str, ...]] = set()

    async def gpu_usage(self, task_id: int, state: dict[str, Any], placement: Placement | None,
                        command: tuple[str, ...]) -> list[tuple[float, float | None]]:
        self.calls.append(task_id)
        self.commands.add(command)
        self.started.setdefault(task_id, asyncio.Event()).set()
        what = self.behaviour.get(task_id, [])
        if what == "hang":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled_reads.append(task_id)
                raise
        if what == "fail":
            raise OSError("nvidia-smi exploded")
        return list(what)


def live(gpus: list[int], status: TaskStatus = TaskStatus.RUNNING, busy: bool = False) -> Live:
    return Live(owner="alice", status=status, time_limit=3600, busy=busy,
                placement=Placement(nodes=[NodeSlots(node="n1", gpus=gpus)]) if gpus else None)


@pytest.fixture
def env(tmp_path: Path) -> Any:
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.migrate()
    ex = GpuExecutor()
    ctl = SimpleNamespace(live={}, executor=ex)
    ctx = SimpleNamespace(store=store, controller=ctl,
                          running=RunningSettings(gpu_sample_interval=0.05, gpu_query_command=("fake-smi", "-q")))
    yield SimpleNamespace(store=store, ex=ex, ctl=ctl, ctx=ctx)
    store.close()


async def until(pred: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


def test_a_row_is_the_mean_util_the_summed_memory_and_the_gpus_that_answered() -> None:
    assert sample_row(1, 5.0, [(10.0, 100.0), (30.0, None), (50.0, 300.0)]) == (1, 5.0, 30.0, 400.0, 3)
    assert sample_row(1, 5.0, [(10.0, None)]) == (1, 5.0, 10.0, None, 1)
    assert sample_row(1, 5.0, []) is None


async def test_only_running_tasks_with_gpus_are_read(env: Any) -> None:
    env.ctl.live.update({1: live([0]), 2: live([]), 3: live([1], TaskStatus.CANCELLING), 4: live([2], busy=True),
                         5: live([3, 4])})
    env.ex.behaviour.update({1: [(40.0, 1.0)], 5: [(10.0, 2.0), (20.0, 3.0)]})
    s = GpuSampler(env.ctx)
    await asyncio.gather(*s.sample())
    await until(lambda: env.store.gpu_samples(1) and env.store.gpu_samples(5))
    assert sorted(env.ex.calls) == [1, 5]
    assert env.ex.commands == {("fake-smi", "-q")}
    (one,), (five,) = env.store.gpu_samples(1), env.store.gpu_samples(5)
    assert (one.util, one.memory_mib, one.gpus) == (40.0, 1.0, 1)
    assert (five.util, five.memory_mib, five.gpus) == (15.0, 5.0, 2)
    await s.stop()


async def test_a_hanging_read_delays_no_other_task(env: Any) -> None:
    env.ctl.live.update({1: live([0]), 2: live([1]), 3: live([2]), 4: live([3])})
    env.ex.behaviour.update({1: "hang", 2: [(20.0, None)], 3: "fail", 4: [(40.0, None)]})
    s = GpuSampler(env.ctx, concurrency=2, read_timeout=600)
    s.sample()
    await until(lambda: env.store.gpu_samples(2) and env.store.gpu_samples(4))
    assert 1 in s._reads and not s._reads[1].done()  # still hanging while the others were written
    assert env.store.gpu_samples(1) == [] and env.store.gpu_samples(3) == []  # the failure wrote nothing
    # Next passes: the hanging task is not read again while its read is in flight; the others are.
    for _ in range(2):
        before = {t: len(env.store.gpu_samples(t)) for t in (2, 4)}
        s.sample()
        await until(lambda before=before: all(len(env.store.gpu_samples(t)) > before[t] for t in (2, 4)))
    assert env.ex.calls.count(1) == 1 and env.ex.calls.count(3) == 3
    await s.stop()
    assert env.ex.cancelled_reads == [1] and not s._reads


async def test_a_read_past_its_timeout_is_cancelled_and_tried_again(env: Any) -> None:
    env.ctl.live.update({1: live([0]), 2: live([1])})
    env.ex.behaviour.update({1: "hang", 2: [(20.0, None)]})
    s = GpuSampler(env.ctx, read_timeout=0.2)
    s.sample()
    await until(lambda: env.ex.cancelled_reads == [1] and 1 not in s._reads)
    env.ex.behaviour[1] = [(70.0, 7.0)]
    s.sample()
    await until(lambda: len(env.store.gpu_samples(1)) == 1 and len(env.store.gpu_samples(2)) == 2)
    assert env.store.gpu_samples(1)[0].util == 70.0
    await s.stop()


async def test_the_loop_samples_every_interval_and_stops(env: Any) -> None:
    env.ctl.live[1] = live([0, 1])
    env.ex.behaviour[1] = [(10.0, 1.0), (30.0, 1.0)]
    s = GpuSampler(env.ctx)
    s.start()
    await until(lambda: len(env.store.gpu_samples(1)) >= 3)
    await s.stop()
    assert all(x.util == 20.0 and x.memory_mib == 2.0 and x.gpus == 2 for x in env.store.gpu_samples(1))
    assert s._loop_task is None and not s._reads


async def test_sampling_off(env: Any) -> None:
    for running in (RunningSettings(gpu_sample_interval=0), RunningSettings(gpu_query_command=())):
        env.ctx.running = running
        s = GpuSampler(env.ctx)
        s.start()
        assert s._loop_task is None
        await s.stop()


async def test_samples_are_pruned_to_the_maximum(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpusampler, "PRUNE_EVERY", 3)
    monkeypatch.setattr(gpusampler, "MAX_SAMPLES_PER_TASK", 4)
    env.ctl.live[1] = live([0])
    env.ex.behaviour[1] = [(10.0, None)]
    s = GpuSampler(env.ctx)
    for _ in range(9):
        await asyncio.gather(*s.sample())
        await until(lambda: s._writer is not None and s._writer.done())
    assert len(env.store.gpu_samples(1)) == 4
    await s.stop()


async def test_a_failing_store_does_not_stop_sampling(env: Any) -> None:
    env.ctl.live[1] = live([0])
    env.ex.behaviour[1] = [(10.0, None)]
    real = env.store.add_gpu_samples
    fails = [1]

    def add(rows: Any) -> None:
        if fails:
            fails.pop()
            raise RuntimeError("database is locked")
        real(rows)

    env.store.add_gpu_samples = add
    s = GpuSampler(env.ctx)
    await asyncio.gather(*s.sample())
    await until(lambda: s._writer is not None and s._writer.done())
    assert env.store.gpu_samples(1) == []
    await asyncio.gather(*s.sample())
    await until(lambda: len(env.store.gpu_samples(1)) == 1)
    await s.stop()


def test_long_runs_are_downsampled_to_at_most_500_points() -> None:
    from tacc_hub.service.taskusage import MAX_POINTS, downsample, task_gpus
    from tacc_hub.store.running import GpuSample

    samples = [GpuSample(at=float(i), util=float(i % 2) * 100, memory_mib=None if i % 3 else 30.0, gpus=1 + i % 2)
               for i in range(2880)]
    points = downsample(samples)
    assert MAX_POINTS // 2 < len(points) <= MAX_POINTS
    assert points[0] == {"at": 0.0, "util": 50.0, "memory_mib": 30.0, "gpus": 2}
    assert [p["at"] for p in points] == sorted(p["at"] for p in points)
    assert downsample(samples[:3]) == [{"at": s.at, "util": s.util, "memory_mib": s.memory_mib, "gpus": s.gpus}
                                       for s in samples[:3]]
    assert downsample([]) == []
    assert task_gpus({"nodes": [{"node": "n1", "gpus": [0, 1]}, {"node": "n2", "gpus": [3]}]}, None) == 3
    assert task_gpus(None, {"resources": {"nodes": 2, "gpus_per_node": 4}}) == 8
    assert task_gpus(None, None) == 0
