"""The FIFO policy: all-or-nothing GPU slots, strict order, per-user running cap."""

from __future__ import annotations

import pytest

from tacc_hub.scheduler import ClusterState, FifoPolicy, Node, NodeSlots, Placement, Request, never_fits, place


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
    c.release(1)
    c.release(1)  # idempotent
    assert all(not n.holders for n in c.nodes.values())


def test_place_packs_onto_the_fullest_node_that_fits():
    c = cluster(4, 4)
    c.allocate(9, Placement(nodes=[NodeSlots(node="n2", gpus=[0, 1])]))
    p = place(req(1, gpus=2), c)
    assert p is not None and p.nodes == [NodeSlots(node="n2", gpus=[2, 3])]
    assert place(req(2, nodes=2, gpus=3), c) is None


def test_multi_node_request_gets_distinct_nodes():
    c = cluster(2, 2, 2)
    p = place(req(1, nodes=3, gpus=2), c)
    assert p is not None and sorted(n.node for n in p.nodes) == ["n1", "n2", "n3"]
    assert p.gpu_count == 6


def test_fifo_head_of_line_blocks_later_tasks():
    c = cluster(4)
    decisions, waiting = FifoPolicy(10).decide([req(1, gpus=2), req(2, gpus=4), req(3, gpus=1)], c, {})
    assert [d.task_id for d in decisions] == [1]
    assert [w.task_id for w in waiting] == [2]  # task 3 is behind the blocked head
    assert "waiting for resources" in waiting[0].reason
    assert len(c.nodes["n1"].holders) == 2


def test_user_cap_skips_without_blocking_others():
    c = cluster(8)
    pending = [req(1, "a"), req(2, "a"), req(3, "b")]
    decisions, waiting = FifoPolicy(1).decide(pending, c, {"a": 1})
    assert [d.task_id for d in decisions] == [3]
    assert {w.task_id for w in waiting} == {1, 2}
    assert all("user limit" in w.reason for w in waiting)


def test_cap_counts_decisions_made_in_the_same_pass():
    decisions, _ = FifoPolicy(2).decide([req(i, "a", gpus=0) for i in range(1, 6)], cluster(0), {})
    assert [d.task_id for d in decisions] == [1, 2]


def test_cpu_only_tasks_need_no_gpus():
    decisions, _ = FifoPolicy(10).decide([req(1, gpus=0)], cluster(0), {})
    assert decisions[0].placement.nodes == [NodeSlots(node="n1", gpus=[])]


def test_partition_and_gpu_type_constrain_placement():
    c = ClusterState([Node("a", 2, partition="p1", gpu_type="v100"), Node("b", 2, partition="p2", gpu_type="a100")])
    p = place(req(1, partition="p2"), c)
    assert p is not None and p.nodes[0].node == "b"
    p = place(req(2, gpu_type="v100"), c)
    assert p is not None and p.nodes[0].node == "a"
    assert place(req(3, partition="p1", gpu_type="a100"), c) is None


def test_never_fits_explains_why():
    c = cluster(2, 2)
    assert never_fits(req(1, nodes=2, gpus=2), c) is None
    assert "cluster has 0" in never_fits(req(1, gpus=4), c)
    assert "cluster has 2" in never_fits(req(1, nodes=3, gpus=1), c)
    assert never_fits(req(1, gpus=1, partition="x"), c) is not None
