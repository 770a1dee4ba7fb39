"""Scheduler: policies over cluster state, the live queue, and the trace simulator. Imports only the schema; pure."""

from . import native

native.install()  # before any submodule: compiled modules only when fresh (see ``native``)

from .cluster import ClusterState, Node, NodeSlots, Placement  # noqa: E402
from .fits import Request, never_fits  # noqa: E402

__all__ = ["ClusterState", "Node", "NodeSlots", "Placement", "Request", "never_fits"]
