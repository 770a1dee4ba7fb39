"""The monitor's update coroutine, driven with a fake client: widget values follow the task."""

from __future__ import annotations

import asyncio
import time

from tacc_hub.jupyter.monitor import TaskMonitor, describe_queue


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
    assert "pending" in mon.title.value and "waiting for 2 GPUs" in mon.title.value
    assert mon.queue.value.startswith("position 3, starts in 2m")
    assert mon.log_view.value == "" and not mon.cancel_button.disabled

    assert jp_asyncio_loop.run_until_complete(mon.update_once()) is True
    assert "running" in mon.title.value and mon.queue.value == "" and mon.log_view.value == "epoch 1\n"

    jp_asyncio_loop.run_until_complete(mon.run())  # the loop ends by itself once the task ended and drained
    assert mon.done and "succeeded" in mon.title.value
    assert mon.log_view.value == "epoch 1\nepoch 2\ndone\n"
    assert fake.offsets == [0, 0, 8]  # each poll resumes at the last offset
    assert mon.cancel_button.disabled and fake.closed


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
    assert mon.done and mon.log_view.value.endswith("done\n")


def test_describe_queue():
    assert describe_queue(None) == ""
    assert describe_queue({"position": 1, "estimated_start": None}) == "position 1, start time unknown"
    assert describe_queue({"position": 2, "estimated_start": 100.0, "reason": "quota"}, now=100.0) == \
        "position 2, starts now, (quota)"
    assert describe_queue({"position": 2, "estimated_start": 3700.0}, now=100.0) == "position 2, starts in 1h"
