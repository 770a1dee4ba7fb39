"""Keeping the scheduler's node list current: the executor's nodes are read again periodically.

The controller reads the nodes once at start; with an executor whose nodes change underneath
(Slurm: an admin drains a node, a node goes down and comes back), this loop asks the executor
again every ``interval`` seconds, in a worker thread (the executor's commands block), and
applies the answer to the cluster state (``ClusterState.update_nodes``): a node that can no
longer take work is left out of every scheduling pass, and the tasks already running there keep
their slots and their record; a node that comes back is scheduled on again. When the executor
cannot answer, the last known list stays. A run ended by a node failure triggers a read at once
(``recovery``); one read is in flight at a time (``Controller.read_nodes``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from tacc_hub.executors import Executor

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
