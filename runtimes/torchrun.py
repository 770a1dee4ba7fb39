"""``torchrun``: PyTorch elastic launcher, one launcher per node starting the ranks.

Ranks per node: ``options.nproc_per_node``, else ``resources.tasks_per_node``
when above 1, else the node's GPU count, else 1. Rendezvous values come from
the launch-time variables through torchrun's own ``PET_*`` environment
variables, so the argv stays the same on every node. Several nodes use torchrun's
static rendezvous: ``--nnodes`` from the spec, each node's rank from
``TACC_NODE_RANK`` and rank 0's address and port from ``TACC_MASTER_ADDR`` /
``TACC_MASTER_PORT`` (the Slurm executor sets them per node; the local executor
runs single-node tasks only).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tacc_hub.compiler.plan import Arg, NodeLaunch
from tacc_hub.compiler.runtime import LaunchContext

from ._common import python_mode, ranks_per_node


class TorchrunOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    nproc_per_node: int | None = Field(None, ge=1, le=256)
    max_restarts: int = Field(0, ge=0, le=100)


class TorchrunRuntime:
    name = "torchrun"
    options = TorchrunOptions

    def launch(self, ctx: LaunchContext, opts: TorchrunOptions) -> NodeLaunch:
        nproc = ranks_per_node(ctx, opts.nproc_per_node)
        head: list[Arg] = [
            "python", "-m", "torch.distributed.run",
            f"--nnodes={ctx.nodes}", f"--nproc-per-node={nproc}", f"--max-restarts={opts.max_restarts}",
        ]
        mode, argv = python_mode(ctx)
        if mode == "module":
            head.append("--module")  # python -m pkg args -> torchrun --module pkg args
        elif mode == "exec":
            head.append("--no-python")
        return NodeLaunch(
            argv=[*head, *argv],
            procs_per_node=nproc,
            env_from={
                "PET_NODE_RANK": "TACC_NODE_RANK",
                "PET_MASTER_ADDR": "TACC_MASTER_ADDR",
                "PET_MASTER_PORT": "TACC_MASTER_PORT",
            },
        )
