"""Topology-aware placement: pack a task on one node, else within one switch, else spread.

A node is ``NodeView`` (name, GPU count, switch id, free GPU indices). ``FreeMap``
is a policy's scratch copy of the free slots for one scheduling pass: it
``take``s the slots of each placement it decides and ``give``s back those of
each task it preempts, so later decisions in the same pass see them.

Shapes. A *rigid* task needs exactly ``nodes`` distinct nodes with
``gpus_per_node`` GPUs each (what a torchrun launch needs). A *flexible* task
needs ``nodes * gpus_per_node`` GPUs in total, split over nodes in any way (a
trace job that only says how many GPUs it used).

Invariants:
- ``fit`` never returns a GPU that is not free in the map, nor one GPU twice.
- A placement is whole or absent (gang, all-or-nothing): ``fit`` returns None
  rather than part of a task.
- Preference order: the fewest nodes (one node if the task fits on one), then
  one switch, then across switches. ``Fit.spread`` is True when the placement
  spans more nodes than the task's minimum (``min_nodes``) or more than one
  switch: the job may run slower there (see ``sim.slowdown``).
- Among equally good nodes the fullest that still fits is used (best fit), so
  large holes stay for large tasks. Deterministic: ties break by node name.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress, count
from operator import is_not

from .cluster import NodeSlots, Placement
from .frozen import Frozen

_GENERATIONS = count(1)


@dataclass(frozen=True, slots=True)
class NodeView(Frozen):
    name: str
    gpus: int
    switch: str
    free: tuple[int, ...]

    def __init__(self, name: str, gpus: int, switch: str, free: tuple[int, ...]) -> None:
        # written out (not the dataclass's own): compiled (``native``), an explicit ``__init__`` is native,
        # 15x faster to call; the same fields, order and defaults (tests/unit/test_frozen_init.py)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "switch", switch)
        object.__setattr__(self, "free", free)


@dataclass(frozen=True, slots=True)
class Fit(Frozen):
    placement: Placement
    spread: bool

    def __init__(self, placement: Placement, spread: bool) -> None:
        # written out (not the dataclass's own): compiled (``native``), an explicit ``__init__`` is native,
        # 15x faster to call; the same fields, order and defaults (tests/unit/test_frozen_init.py)
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "spread", spread)


Plan = tuple[list[tuple[str, int]], bool]  # (node, GPU count) pairs, spread


def slot_counts(placement: Placement) -> tuple[tuple[str, int], ...]:
    """A placement as (node, GPU count) pairs (what ``FreeCounts`` takes)."""
    return tuple([(sl.node, len(sl.gpus)) for sl in placement.nodes])


@functools.lru_cache(maxsize=4096)  # bounded: a few thousand shared objects at most
def _node_slots(node: str, gpus: tuple[int, ...]) -> NodeSlots:
    """One frozen ``NodeSlots`` per (node, GPUs), shared by every placement that uses it (never changed)."""
    return NodeSlots.model_construct(node=node, gpus=list(gpus))


def min_nodes(gpus: int, node_size: int) -> int:
    """The fewest nodes of ``node_size`` GPUs that hold ``gpus`` GPUs."""
    n = -(-gpus // (node_size if node_size > 1 else 1))  # (as max(1, ...) twice, without the calls: a hot path)
    return n if n > 1 else 1


def switches_of(placement: Placement, switch: dict[str, str]) -> int:
    return len({switch.get(s.node, "") for s in placement.nodes})


class FreeMap:
    """Free GPU slots per node, mutable for planning one pass (the input views are not touched)."""

    __slots__ = ("_counts", "_counts_gen", "_members", "free", "gen", "node_size", "switch", "total")

    def __init__(self, nodes: Iterable[NodeView]) -> None:
        self.free: dict[str, list[int]] = {}
        self.switch: dict[str, str] = {}
        self.node_size = 0
        self.total = 0
        # a new value, never used before by any map, on every change: callers may cache fits per generation,
        # and a caller that undoes its changes may set ``gen`` back to the value it had then
        self.gen = next(_GENERATIONS)
        self._members: dict[str, list[str]] | None = None  # node names per switch, built when first needed
        self._counts: dict[str, int] | None = None  # ``counts()`` as of generation ``_counts_gen``
        self._counts_gen = -1
        for n in nodes:
            self.free[n.name] = list(n.free)
            self.switch[n.name] = n.switch
            self.node_size = max(self.node_size, n.gpus)
            self.total += len(n.free)

    def copy(self) -> FreeMap:
        """An independent map with the same free slots (cheap: ``take`` and ``give`` replace lists, never edit them)."""
        new = FreeMap(())
        new.free = dict(self.free)
        new.switch = self.switch  # read only
        new.node_size, new.total = self.node_size, self.total
        new._members = self._members  # derived from ``switch`` only
        if self._counts is not None and self._counts_gen == self.gen:
            new._counts, new._counts_gen = self._counts, new.gen  # the same free slots
        return new

    def counts(self) -> dict[str, int]:
        """Free GPUs per node; kept until the map changes (its generation): read it, never change it."""
        c = self._counts
        if c is None or self._counts_gen != self.gen:
            c = self._counts = dict(zip(self.free.keys(), map(len, self.free.values()), strict=True))
            self._counts_gen = self.gen
        return c

    def can_take(self, placement: Placement) -> bool:
        for slot in placement.nodes:
            free = self.free.get(slot.node)
            if free is None or len(set(slot.gpus)) != len(slot.gpus) or not set(slot.gpus) <= set(free):
                return False
        return len({s.node for s in placement.nodes}) == len(placement.nodes)

    def take(self, placement: Placement) -> None:
        if not self.can_take(placement):
            raise ValueError(f"placement {placement} is not free")
        for slot in placement.nodes:
            taken = set(slot.gpus)
            self.free[slot.node] = [g for g in self.free[slot.node] if g not in taken]
            self.total -= len(taken)
        self.gen = next(_GENERATIONS)

    def give(self, placement: Placement) -> None:
        free = self.free
        for slot in placement.nodes:
            old = free.get(slot.node)
            if old is not None:
                new = sorted(set(old) | set(slot.gpus))
                free[slot.node] = new
                self.total += len(new) - len(old)
        self.gen = next(_GENERATIONS)

    def packed(self, nodes: int, gpus_per_node: int, flexible: bool = False) -> bool:
        """Whether ``fit`` would return a placement that is not spread (without building it)."""
        need = nodes * gpus_per_node
        if need <= 0:
            return True
        if need > self.total:
            return False
        if flexible:
            least = min_nodes(need, self.node_size)
            if least == 1:
                return max(map(len, self.free.values())) >= need
            by_switch: dict[str, list[int]] = {}
            sw = self.switch
            for name, free in self.free.items():
                if free:
                    by_switch.setdefault(sw[name], []).append(len(free))
            for ks in by_switch.values():
                if len(ks) >= least and sum(ks) >= need and sum(sorted(ks, reverse=True)[:least]) >= need:
                    return True
            return False
        if nodes == 1:
            return max(map(len, self.free.values())) >= gpus_per_node
        count: dict[str, int] = {}
        sw = self.switch
        for name, free in self.free.items():
            if len(free) >= gpus_per_node:
                s = sw[name]
                c = count[s] = count.get(s, 0) + 1
                if c >= nodes:
                    return True
        return False

    def packed_after_give(self, placement: Placement, nodes: int, gpus_per_node: int, flexible: bool) -> bool:
        """``packed(...)`` right after ``give(placement)``, given it was False before: only the switches the
        placement touches changed (more free GPUs), so only they can now hold a packed placement."""
        need = nodes * gpus_per_node
        if need > self.total:
            return False
        free = self.free
        if flexible:
            least = min_nodes(need, self.node_size)
            if least == 1:
                return any(len(free.get(s.node, ())) >= need for s in placement.nodes)
        elif nodes == 1:
            return any(len(free.get(s.node, ())) >= gpus_per_node for s in placement.nodes)
        members = self._members
        if members is None:
            members = self._members = {}
            for name, sw in self.switch.items():
                members.setdefault(sw, []).append(name)
        for sw in {self.switch[s.node] for s in placement.nodes if s.node in free}:
            if flexible:
                ks = sorted((len(free[n]) for n in members[sw]), reverse=True)
                if sum(ks[:least]) >= need:
                    return True
            elif sum(1 for n in members[sw] if len(free[n]) >= gpus_per_node) >= nodes:
                return True
        return False

    def counts_with(self, extra: dict[str, int]) -> dict[str, int]:
        """Free GPUs per node if each node had ``extra[node]`` more (for ``could_fit``)."""
        return {n: c + extra.get(n, 0) for n, c in self.counts().items()}

    def could_fit(self, counts: dict[str, int], nodes: int, gpus_per_node: int, flexible: bool,
                  packed: bool, one_switch: bool) -> bool:
        """Whether the shape could fit (``packed``: not spread; ``one_switch``: within one switch) if each
        node had ``counts[node]`` free GPUs (``counts_with``): an upper bound, from counts only.

        (Plain loops, no generators: a hot path, compiled.)"""
        need = nodes * gpus_per_node
        total, most = 0, 0
        for c in counts.values():
            total += c
            if c > most:
                most = c
        if total < need:
            return False
        sw = self.switch
        if flexible:
            least = min_nodes(need, self.node_size)
            if packed and least == 1:
                return most >= need
            if not packed and not one_switch:
                return True
            by: dict[str, list[int]] = {}
            for n, c in counts.items():
                if c:
                    ks = by.get(sw[n])
                    if ks is None:
                        by[sw[n]] = [c]
                    else:
                        ks.append(c)
            for ks in by.values():
                if packed:
                    ks.sort(reverse=True)
                    ks = ks[:least]
                got = 0
                for c in ks:
                    got += c
                if got >= need:
                    return True
            return False
        big = 0
        for c in counts.values():
            if c >= gpus_per_node:
                big += 1
        if big < nodes:
            return False
        if nodes == 1 or not (packed or one_switch):
            return True
        per: dict[str, int] = {}
        for n, c in counts.items():
            if c >= gpus_per_node:
                k = per[sw[n]] = per.get(sw[n], 0) + 1
                if k >= nodes:
                    return True
        return False

    def fit(self, nodes: int, gpus_per_node: int, flexible: bool = False) -> Fit | None:
        """The best placement for this shape now (see the module docstring), or None."""
        plan = self.plan(nodes, gpus_per_node, flexible)
        return None if plan is None else self.build(plan)

    def plan(self, nodes: int, gpus_per_node: int, flexible: bool = False) -> Plan | None:
        """What ``fit`` would place, as (node, GPU count) pairs and whether it is spread, without building it.

        ``build`` turns it into the ``Fit``; valid only while the map is unchanged (same ``gen``)."""
        need = nodes * gpus_per_node
        if need <= 0:
            return ([], False)
        if need > self.total:
            return None
        if flexible:
            return self._fit_flexible(need)
        return self._fit_rigid(nodes, gpus_per_node)

    def build(self, plan: Plan) -> Fit:
        counts, spread = plan
        if not counts:
            return Fit(Placement(nodes=[]), False)
        # built from the map's own free lists: valid by construction, so pydantic validation is skipped
        free = self.free
        slots = [_node_slots(n, tuple(free[n][:k])) for n, k in counts]
        return Fit(Placement.model_construct(nodes=slots), spread)

    @staticmethod
    def _slots(counts: list[tuple[str, int]], spread: bool) -> Plan:
        return counts, spread

    def _best_single(self, need: int) -> str | None:
        """The node with the fewest free GPUs that still holds ``need`` (ties: first by name)."""
        best: str | None = None
        best_free = 1 << 30
        for name, free in self.free.items():
            k = len(free)
            if k < need or k > best_free or (k == best_free and best is not None and name > best):
                continue
            best, best_free = name, k
        return best

    def _fit_rigid(self, nodes: int, per_node: int) -> Plan | None:
        if nodes == 1:
            name = self._best_single(per_node)
            return None if name is None else self._slots([(name, per_node)], False)
        by_switch: dict[str, list[str]] = {}
        for name, free in self.free.items():
            if len(free) >= per_node:
                by_switch.setdefault(self.switch[name], []).append(name)
        if sum(len(v) for v in by_switch.values()) < nodes:
            return None
        fullest_first = lambda n: (len(self.free[n]), n)  # noqa: E731
        inside = [(len(v), s) for s, v in by_switch.items() if len(v) >= nodes]
        if inside:
            _, sw = min(inside)
            chosen = sorted(by_switch[sw], key=fullest_first)[:nodes]
            return self._slots([(n, per_node) for n in chosen], False)
        chosen = []
        for _, sw in sorted(((-len(v), s) for s, v in by_switch.items())):
            chosen.extend(sorted(by_switch[sw], key=fullest_first))
        return self._slots([(n, per_node) for n in chosen[:nodes]], True)

    def _greedy(self, names: list[str], need: int) -> list[tuple[str, int]] | None:
        free = self.free
        counts: list[tuple[str, int]] = []
        for _, name in sorted([(-len(free[n]), n) for n in names]):
            k = min(len(free[name]), need)
            if k <= 0:
                break
            counts.append((name, k))
            need -= k
        return counts if need == 0 else None

    @staticmethod
    def _greedy_nodes(ks: list[int], need: int) -> int | None:
        """How many nodes ``_greedy`` would use on nodes with these free counts (None: they cannot hold ``need``)."""
        n = 0
        for k in sorted(ks, reverse=True):
            if k <= 0:
                break
            n += 1
            need -= k
            if need <= 0:
                return n
        return None

    def _fit_flexible(self, need: int) -> Plan | None:
        least = min_nodes(need, self.node_size)
        if least == 1:
            name = self._best_single(need)
            if name is not None:
                return self._slots([(name, need)], False)
        by_switch: dict[str, list[str]] = {}
        sizes: dict[str, list[int]] = {}
        swof = self.switch
        for name, free in self.free.items():
            if free:
                s = swof[name]
                if s in by_switch:
                    by_switch[s].append(name)
                    sizes[s].append(len(free))
                else:
                    by_switch[s] = [name]
                    sizes[s] = [len(free)]
        best_sw: str | None = None
        best_n = 1 << 30
        for sw in sorted(by_switch):  # the first switch with the fewest nodes (as _greedy would pick them)
            ks = sizes[sw]
            if sum(ks) < need:
                continue
            n = self._greedy_nodes(ks, need)
            if n is not None and n < best_n:
                best_sw, best_n = sw, n
                if n <= least:
                    break  # nobody does better than the fewest possible
        if best_sw is not None:
            best = self._greedy(by_switch[best_sw], need)
            assert best is not None
            return self._slots(best, len(best) > least)
        counts = self._greedy([n for n, f in self.free.items() if f], need)  # empty nodes would end it anyway
        return None if counts is None else self._slots(counts, True)


class FreeCounts:
    """Free GPUs per node as counts only: what ``FreeMap.packed`` and ``packed_after_give`` answer, without
    the GPU indices (for estimates that give back many placements, e.g. a packed placement's wait).

    Invariant: the answers equal ``FreeMap``'s for the same gives, as long as the placements given back are
    disjoint from the free slots and from each other (running tasks' placements are)."""

    __slots__ = ("count", "members", "node_size", "switch", "total")

    def __init__(self, m: FreeMap) -> None:
        self.count = dict(m.counts())
        self.switch, self.node_size, self.total = m.switch, m.node_size, m.total
        members = m._members
        if members is None:
            members = m._members = {}
            for name, sw in m.switch.items():
                members.setdefault(sw, []).append(name)
        self.members = members

    def give(self, slots: Sequence[tuple[str, int]]) -> None:
        """Give back a placement, as (node, GPU count) pairs (``slot_counts``)."""
        count = self.count
        for node, k in slots:
            have = count.get(node)
            if have is not None:
                count[node] = have + k
                self.total += k

    def packed(self, nodes: int, gpus_per_node: int, flexible: bool = False) -> bool:
        """``FreeMap.packed`` on these counts."""
        need = nodes * gpus_per_node
        if need <= 0:
            return True
        if need > self.total:
            return False
        count, sw = self.count, self.switch
        if flexible:
            least = min_nodes(need, self.node_size)
            if least == 1:
                return max(count.values()) >= need
            by_switch: dict[str, list[int]] = {}
            for name, k in count.items():
                if k:
                    by_switch.setdefault(sw[name], []).append(k)
            return any(len(ks) >= least and sum(ks) >= need and sum(sorted(ks, reverse=True)[:least]) >= need
                       for ks in by_switch.values())
        if nodes == 1:
            return max(count.values()) >= gpus_per_node
        per: dict[str, int] = {}
        for name, k in count.items():
            if k >= gpus_per_node:
                c = per[sw[name]] = per.get(sw[name], 0) + 1
                if c >= nodes:
                    return True
        return False

    def packed_after_give(self, slots: Sequence[tuple[str, int]], nodes: int, gpus_per_node: int,
                          flexible: bool) -> bool:
        """``FreeMap.packed_after_give`` on these counts (the placement as (node, GPU count) pairs)."""
        need = nodes * gpus_per_node
        if need > self.total:
            return False
        count = self.count
        if flexible:
            least = min_nodes(need, self.node_size)
            if least == 1:
                return any(count.get(n, 0) >= need for n, _ in slots)
        elif nodes == 1:
            return any(count.get(n, 0) >= gpus_per_node for n, _ in slots)
        members = self.members
        for sw in {self.switch[n] for n, _ in slots if n in count}:
            if flexible:
                ks = sorted((count[n] for n in members[sw]), reverse=True)
                if sum(ks[:least]) >= need:
                    return True
            elif sum(1 for n in members[sw] if count[n] >= gpus_per_node) >= nodes:
                return True
        return False


class MapCache:
    """A ``FreeMap`` kept in step with a caller's node views, pass after pass.

    A caller that passes the same ``NodeView`` objects for nodes that did not
    change (the simulator) costs one identity check per node and one list per
    changed node; fresh views every pass (a service) cost what building the map
    costs. ``of`` returns a copy the pass may change freely."""

    __slots__ = ("map", "nodes")

    def __init__(self) -> None:
        self.map: FreeMap | None = None
        self.nodes: list[NodeView] = []

    def of(self, nodes: Sequence[NodeView]) -> FreeMap:
        return self.current(nodes).copy()

    def current(self, nodes: Sequence[NodeView]) -> FreeMap:
        """The cached map itself, in step with ``nodes``: never change it (``of`` gives a copy to change)."""
        m, prev = self.map, self.nodes
        if m is None or len(prev) != len(nodes):
            return self._build(nodes)
        changed = list(compress(range(len(nodes)), map(is_not, prev, nodes)))
        if changed:
            for k in changed:
                n, o = nodes[k], prev[k]
                if n.name != o.name or n.switch != o.switch or n.gpus != o.gpus:
                    return self._build(nodes)
                if n.free != o.free:
                    m.free[n.name] = list(n.free)
                    m.total += len(n.free) - len(o.free)
                    m.gen = next(_GENERATIONS)
            self.nodes = list(nodes)
        return m

    def _build(self, nodes: Sequence[NodeView]) -> FreeMap:
        self.map = m = FreeMap(nodes)
        self.nodes = list(nodes)
        return m
