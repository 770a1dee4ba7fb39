"""Cluster state: nodes, GPU slots used and free, queue sizes."""

from __future__ import annotations

from .base import ApiHandler
from .models import ClusterOut, NodeOut


class ClusterHandler(ApiHandler):
    openapi = {"get": {"summary": "Nodes (partition, switch, whether new tasks may go there) with their GPUs "
                       "used/free, the partitions and switches, and how many tasks wait and run. `gpus`, "
                       "`gpus_used` and `gpus_free` count schedulable nodes only.",
                       "response": ClusterOut}}

    def get(self) -> None:
        ctl = self.ctx.controller
        nodes = [NodeOut.model_validate(n) for n in ctl.cluster.summary()]
        if not self.admin:  # task ids on a node are other users' business
            nodes = [n.model_copy(update={"tasks": [t for t in n.tasks if ctl.live.get(t) and
                                                    ctl.live[t].owner == self.user]}) for n in nodes]
        usable = [n for n in nodes if n.schedulable]
        total = sum(n.gpus for n in usable)
        used = sum(n.gpus_used for n in usable)
        switches: dict[str, list[str]] = {}
        for n in nodes:
            switches.setdefault(n.switch, []).append(n.name)
        self.write_json(ClusterOut(executor=ctl.executor.name, nodes=nodes, gpus=total, gpus_used=used,
                                   gpus_free=total - used, pending=len(ctl.queue.waiting) + len(ctl.held),
                                   running=len(ctl.live),
                                   partitions=sorted({n.partition for n in nodes if n.partition}),
                                   switches=switches))
