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


class TorchrunOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    nproc_per_node: int | None = Field(None, ge=1, le=256)
    max_restarts: int = Field(0, ge=0, le=100)


class TorchrunRuntime:
    name = "torchrun"
    options = TorchrunOptions

    def launch(self, ctx: LaunchContext, opts: TorchrunOptions) -> NodeLaunch:
        nproc = opts.nproc_per_node or (
            ctx.tasks_per_node if ctx.tasks_per_node > 1 else max(ctx.gpus_per_node, 1)
        )
        argv = list(ctx.user_argv)
        head: list[Arg] = [
            "python", "-m", "torch.distributed.run",
            f"--nnodes={ctx.nodes}", f"--nproc-per-node={nproc}", f"--max-restarts={opts.max_restarts}",
        ]
        first = argv[0] if argv else ""
        second = argv[1] if len(argv) > 1 else ""
        if not ctx.shell and first in ("python", "python3") and second == "-m" and len(argv) > 2:
            head.append("--module")  # python -m pkg args -> torchrun --module pkg args
            argv = argv[2:]
        elif (
            not ctx.shell and first in ("python", "python3") and isinstance(second, str)
            and second and not second.startswith("-")
        ):
            argv = argv[1:]  # python train.py args -> torchrun train.py args
        elif ctx.shell or not (isinstance(first, str) and first.endswith(".py")):
            # Anything else (a shell entrypoint, `python -u ...`, `python -c ...`, another
            # program) runs as given in every rank: torchrun would read `-u` as its own option.
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
