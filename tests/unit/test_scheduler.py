"""Cluster state (all-or-nothing slots) and the submit-time check that a request can ever fit."""

from __future__ import annotations

import pytest

from tacc_hub.scheduler import ClusterState, Node, NodeSlots, Placement, Request, never_fits


def cluster(*gpus: int) -> ClusterState:
    return ClusterState([Node(name=f"n{i + 1}", gpus=g) for i, g in enumerate(gpus)])


def req(tid: int, owner: str = "u", nodes: int = 1, gpus: int = 1, **kw) -> Request:
    return Request(task_id=tid, owner=owner, nodes=nodes, gpus_per_node=gpus, **kw)


def test_allocation_is_all_or_nothing():
    c = cluster(2, 2)
    c.allocate(1, Placement(nodes=[NodeSlots(node="n1", gpus=[0])]))
    bad = Placement(nodes=[NodeSlots(node="n2", gpus=[0, 1]), NodeSlots(node="n1", gpus=[0])])
    with pytest.raises(ValueError, match="not free"):
        c.allocate(2, bad)
    assert c.nodes["n2"].holders == {}  # nothing of the failed placement was kept
    with pytest.raises(ValueError, match="already holds"):
        c.allocate(1, Placement(nodes=[NodeSlots(node="n2", gpus=[0])]))
    with pytest.raises(ValueError, match="twice"):  # one GPU counted as two: found by the fuzzer
        c.allocate(3, Placement(nodes=[NodeSlots(node="n2", gpus=[1, 1])]))
    with pytest.raises(ValueError, match="twice"):
        c.allocate(3, Placement(nodes=[NodeSlots(node="n2", gpus=[0]), NodeSlots(node="n2", gpus=[1])]))
    assert c.nodes["n2"].holders == {}
    c.release(1)
    c.release(1)  # idempotent
    assert all(not n.holders for n in c.nodes.values())


def test_never_fits_explains_why():
    c = cluster(2, 2)
    assert never_fits(req(1, nodes=2, gpus=2), c) is None
    assert "cluster has 0" in never_fits(req(1, gpus=4), c)
    assert "cluster has 2" in never_fits(req(1, nodes=3, gpus=1), c)
    assert never_fits(req(1, gpus=1, partition="x"), c) is not None
