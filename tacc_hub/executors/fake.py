"""An in-memory executor for unit tests of the service and scheduler wiring.

Tasks "run" until a test calls ``finish(task_id, exit_code)`` or ``vanish``. Faults:
``fail_node(name)`` ends the runs on a node as Slurm's NODE_FAIL does and takes the node out of
``refresh_nodes`` (``node_states`` says "down") until ``restore_node``; ``unreachable = "why"``
makes launches raise ``LaunchUnavailable`` and polls answer "unknown" until it is None;
``hold = "why"`` is what ``unavailable()`` says, until a ``probe`` finds the cluster reachable again.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..scheduler.cluster import Node
from .base import REQUEUE_MARK, Executor, Launch, LaunchError, LaunchUnavailable, Observation


class FakeExecutor(Executor):
    name = "fake"

    def __init__(self, gpus: int = 4, nodes: int = 1, fail_launch: bool = False) -> None:
        self._nodes = [Node(name=f"n{i + 1}", gpus=gpus) for i in range(nodes)]
        self.fail_launch = fail_launch
        self.launched: list[Launch] = []
        self.cancelled: list[int] = []
        self.results: dict[int, Observation] = {}
        self.root = Path(tempfile.mkdtemp(prefix="tacc-fake-"))
        self.down: set[str] = set()
        self.unreachable: str | None = None
        self.hold: str | None = None
        self.probes = 0

    def nodes(self) -> list[Node]:  # copies: the service's ClusterState changes its own Node objects
        return [Node(n.name, n.gpus, n.partition, n.gpu_type, switch=n.switch) for n in self._nodes]

    def refresh_nodes(self) -> list[Node]:
        return [n for n in self.nodes() if n.name not in self.down]

    def node_states(self) -> dict[str, str]:
        return {name: "down" for name in self.down}

    def fail_node(self, name: str) -> list[int]:
        """The node dies: the runs on it end (NODE_FAIL); returns their task ids."""
        self.down.add(name)
        latest = {la.task_id: la for la in self.launched}  # a task's current run is its last launch
        hit = [t for t, la in latest.items() if any(s.node == name for s in la.placement.nodes)
               and self.results.get(t) == Observation("running")]
        for tid in hit:
            self.results[tid] = Observation("exited", exit_code=1, reason=f"node failure {REQUEUE_MARK}")
        self.wake()
        return hit

    def restore_node(self, name: str) -> None:
        self.down.discard(name)

    def unavailable(self) -> str | None:
        return self.hold

    async def probe(self) -> None:
        self.probes += 1
        if self.unreachable is None:
            self.hold = None

    def task_dir(self, task_id: int) -> Path:
        return self.root / str(task_id)

    async def launch(self, launch: Launch) -> dict[str, Any]:
        if self.fail_launch:
            raise LaunchError("fake launch failure")
        if self.unreachable:
            raise LaunchUnavailable(f"could not reach the fake cluster: {self.unreachable}")
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
        if self.unreachable:
            return {t: Observation("unknown", reason=self.unreachable) for t in states}
        return {t: self.results.get(t, Observation("gone", reason="never launched")) for t in states}

    async def cancel(self, task_id: int, state: dict[str, Any]) -> None:
        self.cancelled.append(task_id)
        self.results[task_id] = Observation("gone", reason="cancelled")
