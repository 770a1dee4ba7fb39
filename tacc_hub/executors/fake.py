"""An in-memory executor for unit tests of the service and scheduler wiring.

Tasks "run" until a test calls ``finish(task_id, exit_code)`` or ``vanish``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..scheduler.cluster import Node
from .base import Executor, Launch, LaunchError, Observation


class FakeExecutor(Executor):
    name = "fake"

    def __init__(self, gpus: int = 4, nodes: int = 1, fail_launch: bool = False) -> None:
        self._nodes = [Node(name=f"n{i + 1}", gpus=gpus) for i in range(nodes)]
        self.fail_launch = fail_launch
        self.launched: list[Launch] = []
        self.cancelled: list[int] = []
        self.results: dict[int, Observation] = {}
        self.root = Path(tempfile.mkdtemp(prefix="tacc-fake-"))

    def nodes(self) -> list[Node]:
        return list(self._nodes)

    def task_dir(self, task_id: int) -> Path:
        return self.root / str(task_id)

    async def launch(self, launch: Launch) -> dict[str, Any]:
        if self.fail_launch:
            raise LaunchError("fake launch failure")
        self.launched.append(launch)
        self.task_dir(launch.task_id).mkdir(parents=True, exist_ok=True)
        self.log_path(launch.task_id).write_text("")
        self.results[launch.task_id] = Observation("running")
        return {"fake": launch.task_id}

    def finish(self, task_id: int, exit_code: int) -> None:
        self.results[task_id] = Observation("exited", exit_code=exit_code)
        self.wake()

    def vanish(self, task_id: int) -> None:
        self.results[task_id] = Observation("gone", reason="vanished")
        self.wake()

    async def poll(self, states: dict[int, dict[str, Any]]) -> dict[int, Observation]:
        return {t: self.results.get(t, Observation("gone", reason="never launched")) for t in states}

    async def cancel(self, task_id: int, state: dict[str, Any]) -> None:
        self.cancelled.append(task_id)
        self.results[task_id] = Observation("gone", reason="cancelled")
