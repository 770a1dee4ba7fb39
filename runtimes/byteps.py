"""``byteps``: BytePS parameter-server training, its roles set through the ``DMLC_*`` variables.

Every node runs one worker (``bpslaunch`` starts its local ranks, one per GPU). Node rank 0
also runs the scheduler and a server; with ``options.servers: every_node`` every node runs a
server. Values from the launch variables: ``DMLC_PS_ROOT_URI`` / ``DMLC_PS_ROOT_PORT`` from
``TACC_MASTER_ADDR`` / ``TACC_MASTER_PORT`` (the scheduler listens there, on node 0),
``DMLC_NUM_WORKER`` from ``TACC_NNODES`` and ``DMLC_WORKER_ID`` from ``TACC_NODE_RANK``;
``DMLC_NUM_SERVER`` is 1 or the node count. A fixed script starts the scheduler and server in
the background with their own ``DMLC_ROLE``, runs the worker, then stops them. The worker's
GPUs are ``CUDA_VISIBLE_DEVICES`` (handed to bpslaunch as ``NVIDIA_VISIBLE_DEVICES``). When the
site names a socket interface, ps-lite uses it (``DMLC_INTERFACE``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tacc_hub.compiler.plan import NodeLaunch
from tacc_hub.compiler.runtime import LaunchContext
from tacc_hub.schema import SpecError

from ._common import node_script

# $1 "first" or "every_node" (which nodes run a server), then the worker's command.
SCRIPT = """\
set -o pipefail
servers=$1; shift
rank="${TACC_NODE_RANK:-0}"
pids=()
stop() { [ "${#pids[@]}" = 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop EXIT
trap "exit 143" TERM
trap "exit 130" INT
if [ "$rank" = 0 ]; then DMLC_ROLE=scheduler bpslaunch & pids+=($!); fi
if [ "$rank" = 0 ] || [ "$servers" = every_node ]; then DMLC_ROLE=server bpslaunch & pids+=($!); fi
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then export NVIDIA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"; fi
rc=0
DMLC_ROLE=worker bpslaunch "$@" || rc=$?
exit "$rc"
"""


class BytepsOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    servers: Literal["first", "every_node"] = Field(
        "first", description="Which nodes run a BytePS server: node rank 0 only, or every node."
    )


class BytepsRuntime:
    name = "byteps"
    options = BytepsOptions

    def launch(self, ctx: LaunchContext, opts: BytepsOptions) -> NodeLaunch:
        if ctx.tasks_per_node != 1:
            raise SpecError.one(
                "resources.tasks_per_node",
                "runtime byteps starts one worker per node, which starts a rank per GPU; leave tasks_per_node at 1",
            )
        env = {"DMLC_NUM_SERVER": str(ctx.nodes if opts.servers == "every_node" else 1)}
        if ctx.network.socket_ifname and not ctx.network.socket_ifname.startswith(("^", "=")):
            env["DMLC_INTERFACE"] = ctx.network.socket_ifname.split(",")[0]
        return NodeLaunch(
            argv=node_script(self.name, SCRIPT, [opts.servers, *ctx.user_argv]),
            procs_per_node=max(ctx.gpus_per_node, 1),
            env=env,
            env_from={
                "DMLC_PS_ROOT_URI": "TACC_MASTER_ADDR",
                "DMLC_PS_ROOT_PORT": "TACC_MASTER_PORT",
                "DMLC_NUM_WORKER": "TACC_NNODES",
                "DMLC_WORKER_ID": "TACC_NODE_RANK",
            },
        )
