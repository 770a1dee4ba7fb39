"""``deepspeed``: DeepSpeed's per-node launcher (``deepspeed.launcher.launch``) on every node.

The ``deepspeed`` command starts the other nodes over ssh (pdsh); here every node runs its own
launcher instead, as ``deepspeed --no_ssh`` does, with the node's rank from ``TACC_NODE_RANK``
and rank 0's address and port from ``TACC_MASTER_ADDR`` / ``TACC_MASTER_PORT``. The launcher
takes the world as ``--world_info`` (base64 JSON: node -> its GPU indices); a fixed script
builds it at launch, with this node's entry taken from ``CUDA_VISIBLE_DEVICES`` (the slots the
executor gave the task) so that DeepSpeed does not renumber the GPUs. Ranks per node as for
torchrun: ``options.nproc_per_node``, else ``tasks_per_node`` when above 1, else the GPU count.
Each rank gets ``--local_rank=N`` unless ``options.no_local_rank``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from tacc_hub.compiler.plan import Arg, NodeLaunch
from tacc_hub.compiler.runtime import LaunchContext

from ._common import node_script, python_mode, ranks_per_node

# $1 nodes, $2 ranks per node, $3.. launcher flags up to "--", then the user's command.
SCRIPT = """\
set -eo pipefail
nnodes=$1; nproc=$2; shift 2
flags=()
while [ "$1" != "--" ]; do flags+=("$1"); shift; done
shift
IFS=, read -r -a mine <<< "${CUDA_VISIBLE_DEVICES:-}"
if [ "${#mine[@]}" != "$nproc" ]; then mine=(); for ((i = 0; i < nproc; i++)); do mine+=("$i"); done; fi
others=$(seq -s, 0 $((nproc - 1)))
world="{"
for ((n = 0; n < nnodes; n++)); do
  [ "$n" = 0 ] || world+=","
  if [ "$n" = "${TACC_NODE_RANK:-0}" ]; then ids=$(IFS=,; echo "${mine[*]}"); else ids=$others; fi
  world+="\\"node$n\\": [$ids]"
done
world+="}"
info=$(printf "%s" "$world" | base64 -w 0 | tr "+/" "-_")
exec python -u -m deepspeed.launcher.launch --world_info="$info" --node_rank="${TACC_NODE_RANK:-0}" \\
  --master_addr="${TACC_MASTER_ADDR:-127.0.0.1}" --master_port="${TACC_MASTER_PORT:-29500}" "${flags[@]}" "$@"
"""


class DeepspeedOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    nproc_per_node: int | None = Field(None, ge=1, le=256, description="Ranks per node (default: see the module).")
    no_local_rank: bool = Field(False, description="Do not append --local_rank=N to the user's arguments.")


class DeepspeedRuntime:
    name = "deepspeed"
    options = DeepspeedOptions

    def launch(self, ctx: LaunchContext, opts: DeepspeedOptions) -> NodeLaunch:
        nproc = ranks_per_node(ctx, opts.nproc_per_node)
        mode, argv = python_mode(ctx)
        flags: list[Arg] = []
        if mode == "module":
            flags.append("--module")
        elif mode == "exec":
            flags.append("--no_python")
        if opts.no_local_rank:
            flags.append("--no_local_rank")
        return NodeLaunch(
            argv=node_script(self.name, SCRIPT, [str(ctx.nodes), str(nproc), *flags, "--", *argv]),
            procs_per_node=nproc,
        )
