"""Cluster state as the scheduler sees it: nodes, their GPU slots, who holds them.

Invariants: a GPU slot is held by at most one task (a placement naming one
GPU or one node twice is refused); ``allocate`` is all-or-nothing (either
every node of a placement gets its slots or nothing changes); ``release`` of
an unknown task is a no-op. Every node sits under one network switch
(``Node.switch``; one switch, ``"0"``, unless configured); the
topology-aware placement helper is ``ClusterState.place`` (see ``topology``). A node that is
not ``schedulable`` (drained, down or gone, as the executor last reported: ``update_nodes``) keeps
its slots and holders but is left out of ``view``, so no policy places a task on it; it still
counts for what could ever fit (``fits``). GPUs of a node that jobs outside the service hold
(``Node.foreign``, a count: Slurm picks the indices) are not free: ``free`` leaves out that many of
the unheld ones, so no policy places on them and ``allocate`` refuses them; they still count for
what could ever fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from .topology import Fit, NodeView


class NodeSlots(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    node: str
    gpus: list[int] = Field(default_factory=list)


class Placement(BaseModel):
    """Where a task runs: one entry per node, in node-rank order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nodes: list[NodeSlots]

    @property
    def gpu_count(self) -> int:
        return sum(len(n.gpus) for n in self.nodes)


@dataclass
class Node:
    name: str
    gpus: int
    partition: str | None = None
    gpu_type: str | None = None
    holders: dict[int, int] = field(default_factory=dict)  # gpu index -> task id
    switch: str = "0"  # the leaf switch the node hangs off; nodes under one switch talk fastest
    schedulable: bool = True  # False: drained, down or gone; tasks on it keep their slots, no new ones go there
    state: str | None = None  # as the executor reports it (e.g. Slurm's "idle", "mixed", "drain")
    foreign: int = 0  # GPUs held by jobs the service did not start (a shared Slurm partition): not ours to give

    @property
    def free(self) -> list[int]:
        unheld = [i for i in range(self.gpus) if i not in self.holders]
        return unheld[:max(0, len(unheld) - self.foreign)] if self.foreign else unheld


class ClusterState:
    def __init__(self, nodes: list[Node]) -> None:
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        self.held: dict[int, Placement] = {}

    def allocate(self, task_id: int, placement: Placement) -> None:
        if task_id in self.held:
            raise ValueError(f"task {task_id} already holds a placement")
        if len({s.node for s in placement.nodes}) != len(placement.nodes):
            raise ValueError("a node appears twice in the placement")
        for slot in placement.nodes:
            if len(set(slot.gpus)) != len(slot.gpus):
                raise ValueError(f"a GPU appears twice on {slot.node}")
            node = self.nodes.get(slot.node)
            if node is None:
                raise ValueError(f"unknown node {slot.node!r}")
            free = node.free
            for g in slot.gpus:
                if g not in free:
                    raise ValueError(f"GPU {g} on {slot.node} is not free")
        for slot in placement.nodes:
            for g in slot.gpus:
                self.nodes[slot.node].holders[g] = task_id
        self.held[task_id] = placement

    def adopt(self, task_id: int, placement: Placement) -> None:
        """Record a placement found at recovery, even where it no longer fits the configured nodes."""
        for slot in placement.nodes:
            node = self.nodes.get(slot.node)
            if node is None:
                continue
            for g in slot.gpus:
                node.holders.setdefault(g, task_id)
        self.held[task_id] = placement

    def release(self, task_id: int) -> None:
        placement = self.held.pop(task_id, None)
        if placement is None:
            return
        for slot in placement.nodes:
            node = self.nodes.get(slot.node)
            if node is None:
                continue
            for g in slot.gpus:
                if node.holders.get(g) == task_id:
                    del node.holders[g]

    def update_nodes(self, nodes: list[Node], missing_state: dict[str, str] | None = None) -> list[str]:
        """Take a fresh node list from the executor; return the names whose scheduling-relevant data changed.

        A known node missing from ``nodes`` becomes unschedulable (it may come back), its state
        taken from ``missing_state`` (else "gone"); holders are kept everywhere, so tasks running
        on a drained or vanished node keep their record.
        """
        changed: list[str] = []
        seen = set()
        for new in nodes:
            seen.add(new.name)
            old = self.nodes.get(new.name)
            if old is None:
                self.nodes[new.name] = Node(new.name, new.gpus, new.partition, new.gpu_type, switch=new.switch,
                                            schedulable=new.schedulable, state=new.state, foreign=new.foreign)
                changed.append(new.name)
                continue
            before = (old.gpus, old.partition, old.gpu_type, old.switch, old.schedulable, old.foreign)
            old.gpus, old.partition, old.gpu_type, old.switch = new.gpus, new.partition, new.gpu_type, new.switch
            old.schedulable, old.state, old.foreign = new.schedulable, new.state, new.foreign
            if before != (old.gpus, old.partition, old.gpu_type, old.switch, old.schedulable, old.foreign):
                changed.append(new.name)
        for name, old in self.nodes.items():
            if name not in seen:
                if old.schedulable:
                    changed.append(name)
                old.schedulable, old.state = False, (missing_state or {}).get(name, "gone")
        return changed

    def schedulable(self) -> set[str] | None:
        """Names of the nodes new work may go to, or None when that is every node."""
        if all(n.schedulable for n in self.nodes.values()):
            return None
        return {n.name for n in self.nodes.values() if n.schedulable}

    def view(self) -> tuple[NodeView, ...]:
        """The schedulable nodes as plain data for a ``Policy`` (see ``policy.View``)."""
        from .topology import NodeView

        return tuple(NodeView(n.name, n.gpus, n.switch, tuple(n.free)) for n in self.nodes.values() if n.schedulable)

    def place(self, nodes: int, gpus_per_node: int, flexible: bool = False) -> Fit | None:
        """Where a task of this shape would go now (packed, then one switch, then spread), or None."""
        from .topology import FreeMap

        return FreeMap(self.view()).fit(nodes, gpus_per_node, flexible)

    def foreign_note(self) -> str | None:
        """Why fewer GPUs are free than the nodes have, when jobs outside the service hold some (else None):
        "2 GPUs on n1 and 1 GPU on n3 are held by jobs outside tacc"."""
        held = [(n.name, n.foreign) for n in self.nodes.values() if n.foreign > 0 and n.schedulable]
        if not held:
            return None
        parts = [f"{g} GPU{'' if g == 1 else 's'} on {name}" for name, g in held]
        text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"{text} {'is' if len(held) == 1 and held[0][1] == 1 else 'are'} held by jobs outside tacc"

    def summary(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for node in self.nodes.values():
            tasks = sorted(set(node.holders.values()))
            out.append({
                "name": node.name, "gpus": node.gpus, "gpus_used": len(node.holders),
                "gpus_free": len(node.free), "gpus_foreign": node.foreign, "partition": node.partition,
                "gpu_type": node.gpu_type, "tasks": tasks, "switch": node.switch,
                "schedulable": node.schedulable, "state": node.state,
            })
        return out
