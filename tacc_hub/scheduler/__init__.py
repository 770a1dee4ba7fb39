"""Scheduler: policies over cluster state, the live queue, and the trace simulator. Imports only the schema; pure."""

from .cluster import ClusterState, Node, NodeSlots, Placement
from .fits import Request, never_fits

__all__ = ["ClusterState", "Node", "NodeSlots", "Placement", "Request", "never_fits"]
