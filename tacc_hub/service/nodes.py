"""Keeping the scheduler's node list current: the executor's nodes are read again periodically.

The controller reads the nodes once at start; with an executor whose nodes change underneath
(Slurm: an admin drains a node, a node goes down and comes back), this loop asks the executor
again every ``interval`` seconds, in a worker thread (the executor's commands block), and
applies the answer to the cluster state (``ClusterState.update_nodes``): a node that can no
longer take work is left out of every scheduling pass, and the tasks already running there keep
their slots and their record; a node that comes back is scheduled on again. When the executor
cannot answer, the last known list stays. A run ended by a node failure triggers a read at once
(``recovery``); one read is in flight at a time (``Controller.read_nodes``).

GPUs held by jobs the service did not start (a Slurm partition shared with others: ``Node.foreign``)
are not free; a task waiting for GPUs says so (``with_foreign_note``: "needs 8 GPUs; 6 free; 2 GPUs
on n1 are held by jobs outside tacc").
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from tacc_hub.executors import Executor
from tacc_hub.scheduler.cluster import ClusterState
from tacc_hub.scheduler.policy import Explanation

if TYPE_CHECKING:
    from .controller import Controller

log = logging.getLogger("tacc_hub.nodes")


def refreshes(executor: Executor) -> bool:
    """Whether the executor's nodes can change (it overrides ``Executor.refresh_nodes``)."""
    return type(executor).refresh_nodes is not Executor.refresh_nodes


async def refresh_once(ctl: Controller) -> list[str]:
    """Read the nodes now and apply them; return the names of the nodes that changed."""
    try:
        nodes = await asyncio.to_thread(ctl.executor.refresh_nodes)
        states = ctl.executor.node_states()
    except Exception as exc:  # Slurm unreachable or answering nonsense: keep what we know
        log.warning("reading the nodes failed (keeping the last known list): %s", exc)
        return []
    changed = ctl.cluster.update_nodes(nodes, states)
    if changed:
        log.info("nodes changed: %s", ", ".join(
            f"{n} {'schedulable' if ctl.cluster.nodes[n].schedulable else 'not schedulable'}"
            f" ({ctl.cluster.nodes[n].state or 'up'})" for n in changed))
        ctl.nodes_changed()
    return changed


async def refresh_loop(ctl: Controller, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        await ctl.read_nodes()  # refresh_once, shared with a read after a node failure (see recovery)


def with_foreign_note(cluster: ClusterState, explained: dict[int, Explanation]) -> dict[int, Explanation]:
    """``explained`` with the GPUs jobs outside tacc hold added to the detail of every task waiting for GPUs
    (``Resources``, ``Topology``); ``explained`` itself when they hold none."""
    note = cluster.foreign_note()
    if note is None:
        return explained
    return {tid: replace(e, detail=f"{e.detail}; {note}" if e.detail else note)
            if e.reason in ("Resources", "Topology") else e for tid, e in explained.items()}
