"""Whether a request can ever run on a cluster: checked at submit, so a task never waits forever.

Invariant: ``never_fits`` looks at the nodes as configured (their sizes,
partitions and GPU types), not at what is free now: a task it accepts would
start on an idle cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from .cluster import ClusterState, Node


@dataclass(frozen=True, slots=True)
class Request:
    task_id: int
    owner: str
    nodes: int
    gpus_per_node: int
    partition: str | None = None
    gpu_type: str | None = None


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
