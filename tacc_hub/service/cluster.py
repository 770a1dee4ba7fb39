"""Cluster state: nodes, GPU slots used and free, queue sizes."""

from __future__ import annotations

from .base import ApiHandler
from .models import ClusterOut, NodeOut


class ClusterHandler(ApiHandler):
    openapi = {"get": {"summary": "Nodes with their GPUs used/free, and how many tasks wait and run.",
                       "response": ClusterOut}}

    def get(self) -> None:
        ctl = self.ctx.controller
        nodes = [NodeOut.model_validate(n) for n in ctl.cluster.summary()]
        if not self.admin:  # task ids on a node are other users' business
            nodes = [n.model_copy(update={"tasks": [t for t in n.tasks if ctl.live.get(t) and
                                                    ctl.live[t].owner == self.user]}) for n in nodes]
        total = sum(n.gpus for n in nodes)
        used = sum(n.gpus_used for n in nodes)
        self.write_json(ClusterOut(executor=ctl.executor.name, nodes=nodes, gpus=total, gpus_used=used,
                                   gpus_free=total - used, pending=len(ctl.queue.waiting), running=len(ctl.live)))
