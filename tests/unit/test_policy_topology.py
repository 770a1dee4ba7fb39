"""Topology: switches on nodes, and packing (one node, then one switch, then spread)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tacc_hub.scheduler.cluster import ClusterState, Node, NodeSlots, Placement
from tacc_hub.scheduler.topology import FreeCounts, FreeMap, NodeView, min_nodes, slot_counts


def nodes(free_per_node: list[int], size: int = 8, per_switch: int = 2) -> list[NodeView]:
    return [NodeView(f"n{i}", size, f"s{i // per_switch}", tuple(range(size - f, size)))
            for i, f in enumerate(free_per_node)]


def names(fit) -> list[str]:
    return [s.node for s in fit.placement.nodes]


def test_node_default_switch_and_cluster_place():
    state = ClusterState([Node("a", 4), Node("b", 4, switch="s1")])
    assert state.nodes["a"].switch == "0"
    state.allocate(7, Placement(nodes=[NodeSlots(node="a", gpus=[0, 1, 2])]))
    fit = state.place(1, 2)
    assert fit is not None and names(fit) == ["b"] and not fit.spread
    assert state.place(1, 1).placement.nodes[0].node == "a"  # best fit: the fullest node that fits
    assert state.place(2, 4) is None


def test_rigid_multi_node_stays_within_one_switch():
    fm = FreeMap(nodes([8, 2, 8, 8]))  # switch s0: n0 n1, s1: n2 n3
    fit = fm.fit(2, 8)
    assert names(fit) == ["n2", "n3"] and not fit.spread


def test_rigid_multi_node_spreads_across_switches_when_it_must():
    fm = FreeMap(nodes([8, 2, 8, 2]))
    fit = fm.fit(2, 8)
    assert sorted(names(fit)) == ["n0", "n2"] and fit.spread


def test_flexible_task_packs_then_splits_and_says_spread():
    fm = FreeMap(nodes([3, 5, 0, 0]))
    fit = fm.fit(1, 4, flexible=True)
    assert names(fit) == ["n1"] and not fit.spread  # one node with room: packed
    fit = fm.fit(1, 6, flexible=True)
    assert fit.placement.gpu_count == 6 and len(fit.placement.nodes) == 2 and fit.spread
    assert fm.fit(1, 9, flexible=True) is None


def test_take_and_give_keep_the_map_consistent():
    fm = FreeMap(nodes([8, 8]))
    fit = fm.fit(1, 8)
    fm.take(fit.placement)
    assert fm.total == 8 and not fm.can_take(fit.placement)
    fm.give(fit.placement)
    assert fm.total == 16 and fm.can_take(fit.placement)


def test_min_nodes():
    assert [min_nodes(g, 8) for g in (1, 8, 9, 16, 24)] == [1, 1, 2, 2, 3]


def test_generations_never_repeat_after_an_undo():
    # a pass that gives slots back, then undoes it (setting gen back), must not meet a later map state
    # under a generation it cached a fit for: that fit would place GPUs that are no longer free
    fm = FreeMap(nodes([0, 8]))
    g0 = fm.gen
    fm.give(Placement(nodes=[NodeSlots(node="n0", gpus=[0, 1])]))
    seen = fm.gen
    fm.free["n0"], fm.total, fm.gen = [], 8, g0  # the undo
    fm.take(Placement(nodes=[NodeSlots(node="n1", gpus=[0])]))
    assert fm.gen not in (g0, seen)


def test_copy_is_independent_and_map_cache_follows_changed_views():
    from tacc_hub.scheduler.topology import MapCache

    views = nodes([8, 8, 4])
    cache = MapCache()
    work = cache.of(views)
    work.take(work.fit(1, 8).placement)
    assert cache.current(views).total == 20 and work.total == 12  # the pass's copy changed, the cache did not
    views[2] = NodeView("n2", 8, "s1", ())  # the caller replaces the view of a node that changed
    again = cache.current(views)
    assert again.total == 16 and again.free["n2"] == [] and again.free["n0"] == list(range(8))
    assert MapCache().current(views).free == again.free  # the same as a map built from scratch


@settings(max_examples=150, deadline=None)
@given(free=st.lists(st.integers(0, 8), min_size=1, max_size=8), per_switch=st.integers(1, 4),
       data=st.data())
def test_free_counts_answer_as_the_free_map_does_while_placements_are_given_back(free, per_switch, data):
    """FreeCounts (counts only, for estimates) must answer packed/packed_after_give as FreeMap does."""
    fm = FreeMap(nodes(free, per_switch=per_switch))
    counts = FreeCounts(fm)
    # the used GPUs of each node (all but its free ones), cut into disjoint placements of 1-2 nodes
    chunks: list[NodeSlots] = []
    for i, f in enumerate(free):
        used = list(range(8 - f))
        while used:
            k = data.draw(st.integers(1, len(used)))
            chunks.append(NodeSlots(node=f"n{i}", gpus=used[:k]))
            used = used[k:]
    placements: list[Placement] = []
    while chunks:
        k = data.draw(st.integers(1, min(2, len(chunks))))
        placements.append(Placement(nodes=chunks[:k]))
        chunks = chunks[k:]
    shapes = [(n, g, flex) for n in (1, 2, 3) for g in (1, 2, 4, 8) for flex in (False, True)]
    for p in placements:
        before = {s: fm.packed(*s) for s in shapes}
        assert before == {s: counts.packed(*s) for s in shapes}
        fm.give(p)
        counts.give(slot_counts(p))
        for s in shapes:
            assert counts.packed(*s) == fm.packed(*s), s
            if not before[s]:
                assert counts.packed_after_give(slot_counts(p), *s) == fm.packed_after_give(p, *s) == fm.packed(*s), s
