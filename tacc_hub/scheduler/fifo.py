"""The minimal scheduling policy: FIFO, all-or-nothing GPU slots, per-user running cap.

Invariants:
- Tasks are considered in submission order (id ascending); the first task that
  does not fit the free GPUs blocks the ones behind it (no backfill: strict
  FIFO, so a large job is never starved by small ones).
- A task whose owner is at the running cap is skipped, not blocking others.
- A placement gives each of ``nodes`` distinct nodes ``gpus_per_node`` free
  slots, or nothing; the policy only decides, ``ClusterState`` is changed by
  the caller.
- Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .cluster import ClusterState, Node, NodeSlots, Placement


@dataclass(frozen=True, slots=True)
class Request:
    task_id: int
    owner: str
    nodes: int
    gpus_per_node: int
    partition: str | None = None
    gpu_type: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    task_id: int
    placement: Placement


@dataclass(frozen=True, slots=True)
class Waiting:
    task_id: int
    reason: str


def _eligible(node: Node, req: Request) -> bool:
    if req.partition is not None and node.partition != req.partition:
        return False
    return req.gpu_type is None or node.gpu_type == req.gpu_type


def never_fits(req: Request, cluster: ClusterState) -> str | None:
    """Why this request can never run on this cluster, or None if it could when idle."""
    nodes = [n for n in cluster.nodes.values() if _eligible(n, req) and n.gpus >= req.gpus_per_node]
    if len(nodes) < req.nodes:
        return (
            f"needs {req.nodes} node(s) with {req.gpus_per_node} GPU(s) each"
            f"{' in partition ' + req.partition if req.partition else ''}"
            f"{' of type ' + req.gpu_type if req.gpu_type else ''}; the cluster has {len(nodes)}"
        )
    return None


def place(req: Request, cluster: ClusterState) -> Placement | None:
    """Pack onto the nodes with the fewest free slots that still fit (keeps big holes for big jobs)."""
    fits = [n for n in cluster.nodes.values() if _eligible(n, req) and len(n.free) >= req.gpus_per_node]
    if len(fits) < req.nodes:
        return None
    fits.sort(key=lambda n: (len(n.free), n.name))
    chosen = fits[: req.nodes]
    return Placement(nodes=[NodeSlots(node=n.name, gpus=n.free[: req.gpus_per_node]) for n in chosen])


class FifoPolicy:
    def __init__(self, max_running_per_user: int) -> None:
        self.max_running_per_user = max_running_per_user

    def decide(
        self, pending: Iterable[Request], cluster: ClusterState, running_per_user: dict[str, int]
    ) -> tuple[list[Decision], list[Waiting]]:
        """Decisions for tasks that start now, and a reason for each task examined that waits.

        Tasks behind a blocked head are not examined (they wait behind it).

        ``cluster`` is updated for each decision, so the caller sees the state
        it will be in once the decisions are carried out.
        """
        running = dict(running_per_user)
        decisions: list[Decision] = []
        waiting: list[Waiting] = []
        for req in pending:
            if running.get(req.owner, 0) >= self.max_running_per_user:
                waiting.append(Waiting(req.task_id, f"user limit: {self.max_running_per_user} running task(s)"))
                continue
            placement = place(req, cluster)
            if placement is None:
                free = sum(len(n.free) for n in cluster.nodes.values())
                waiting.append(Waiting(
                    req.task_id,
                    f"waiting for resources: {req.nodes} node(s) x {req.gpus_per_node} GPU(s); {free} GPU(s) free",
                ))
                break  # strict FIFO: everything behind the head waits, see the module docstring
            cluster.allocate(req.task_id, placement)
            running[req.owner] = running.get(req.owner, 0) + 1
            decisions.append(Decision(req.task_id, placement))
        return decisions, waiting
