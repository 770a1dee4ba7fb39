"""The monitor's update coroutine, driven with a fake client: widget values follow the task."""

from __future__ import annotations

import asyncio
import time

from tacc_hub.jupyter.monitor import TaskMonitor
from tacc_hub.jupyter.taskline import queue_line, status_line


class FakeClient:
    def __init__(self) -> None:
        now = time.time()
        self.shows = [
            {"id": 7, "name": "train", "status": "pending", "reason": "waiting for 2 GPUs",
             "queue": {"position": 3, "estimated_start": now + 125, "reason": "resources"}},
            {"id": 7, "name": "train", "status": "running", "queue": None},
            {"id": 7, "name": "train", "status": "succeeded", "queue": None},
        ]
        self.chunks = [
            {"data": "", "next_offset": 0, "eof": False},
            {"data": "epoch 1\n", "next_offset": 8, "eof": False},
            {"data": "epoch 2\ndone\n", "next_offset": 21, "eof": True},
        ]
        self.offsets: list[int] = []
        self.cancelled: list[int] = []
        self.closed = False

    def show(self, task_id: int) -> dict:
        return self.shows.pop(0) if len(self.shows) > 1 else self.shows[0]

    def logs(self, task_id: int, offset: int = 0) -> dict:
        self.offsets.append(offset)
        return self.chunks.pop(0)

    def cancel(self, task_id: int) -> dict:
        self.cancelled.append(task_id)
        return {"id": task_id, "name": "train", "status": "cancelling"}

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_update_coroutine_drives_the_widgets(jp_asyncio_loop):
    fake = FakeClient()
    mon = TaskMonitor(lambda: fake, {"id": 7, "name": "train", "status": "pending"}, interval=0)

    assert jp_asyncio_loop.run_until_complete(mon.update_once()) is True
    assert "pending: position 3, starts in 2m (resources)" in mon.title.value, mon.title.value
    assert "waiting for 2 GPUs" not in mon.title.value  # the queue line says why, once
    assert mon.log_view.value == "" and not mon.cancel_button.disabled

    assert jp_asyncio_loop.run_until_complete(mon.update_once()) is True
    assert mon.title.value.endswith(": running") and mon.log_view.value == "epoch 1"

    jp_asyncio_loop.run_until_complete(mon.run())  # the loop ends by itself once the task ended and drained
    assert mon.done and "succeeded" in mon.title.value
    assert mon.log_view.value == "epoch 1\nepoch 2\ndone" and mon.log == "epoch 1\nepoch 2\ndone\n"
    assert fake.offsets == [0, 0, 8]  # each poll resumes at the last offset
    assert mon.cancel_button.disabled and mon.cancel_button.layout.display == "none" and fake.closed


def test_cancel_button_and_start_on_a_running_loop(jp_asyncio_loop):
    fake = FakeClient()
    mon = TaskMonitor(lambda: fake, {"id": 7, "name": "train", "status": "running"}, interval=0)
    mon.cancel_button.click()
    assert fake.cancelled == [7] and "cancelling" in mon.title.value and mon.cancel_button.disabled

    assert mon.start() is False  # no running loop here: the magic prints instead

    async def started() -> bool:
        ok = mon.start()
        await asyncio.wait_for(mon._task, 5)
        return ok

    assert jp_asyncio_loop.run_until_complete(started()) is True
    assert mon.done and mon.log_view.value.endswith("done")


def test_one_line_per_task():
    assert queue_line(None) == ""
    assert queue_line({"position": 1, "estimated_start": None}) == "position 1, start time unknown"
    assert queue_line({"position": 1, "estimated_start": 340.0, "reason": "Quota"}, now=100.0) == \
        "position 1, starts in 4m (Quota)"  # no comma before the reason
    assert queue_line({"position": 2, "estimated_start": 100.5, "reason": "Resources", "detail": "needs 2 GPUs"},
                      now=100.0) == "position 2, starts now (Resources: needs 2 GPUs)"
    assert queue_line({"position": 2, "estimated_start": 3700.0}, now=100.0) == "position 2, starts in 1h"
    never = {"position": 1, "estimated_start": None, "reason": "OverQuota", "detail": "needs 4 GPUs, cap 2"}
    assert queue_line(never) == "can never start under the current quota: needs 4 GPUs, cap 2"
    assert status_line({"status": "cancelled", "reason": "cancelled"}) == "cancelled"
    early = {"status": "cancelled", "reason": "cancelled before it started"}
    assert status_line(early) == "cancelled before it started"
    assert status_line({"status": "failed", "reason": "exit code 1"}) == "failed: exit code 1"
    waiting = {"status": "pending", "reason": "Quota: at its cap",
               "queue": {"position": 1, "estimated_start": 160.0, "reason": "Quota"}}
    assert status_line(waiting, now=100.0) == "pending: position 1, starts in 1m (Quota)"
