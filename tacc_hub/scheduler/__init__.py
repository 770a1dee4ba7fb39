"""Scheduler: policy over cluster state. Imports only the schema; pure."""

from .cluster import ClusterState, Node, NodeSlots, Placement
from .fifo import Decision, FifoPolicy, Request, Waiting, never_fits, place

__all__ = [
    "ClusterState", "Decision", "FifoPolicy", "Node", "NodeSlots", "Placement", "Request", "Waiting",
    "never_fits", "place",
]
