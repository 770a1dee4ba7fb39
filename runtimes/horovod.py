"""``horovod`` and ``mpi``: one rank per slot, all started from node rank 0 by an MPI-style launcher.

Node rank 0 starts every rank of the task; the other nodes' launch.sh exits at once (0), their
ranks being started remotely. Launchers (``options.launcher``):

- ``horovodrun`` (horovod's default), ``mpirun`` (mpi's default; Open MPI's option syntax):
  a hostfile of ``host slots=N`` lines is written at launch into ``$TACC_TASKDIR/hostfile``
  from ``TACC_NODELIST`` (the executor's node list, in node-rank order; one node: localhost),
  and the launcher reaches the other nodes itself (ssh, or Open MPI's Slurm support). mpirun
  forwards the launch environment to the ranks with ``-x`` (all of it but per-node variables:
  CUDA_VISIBLE_DEVICES, TACC_NODE_RANK, SLURM_*, ...); horovodrun forwards it itself.
- ``srun``: under Slurm only, ``srun --overlap`` inside the task's allocation starts
  ``N`` tasks per node with ``--mpi=<options.srun_mpi>`` (PMIx by default); no hostfile.

Ranks per node (``N``): ``options.nproc_per_node``, else ``tasks_per_node`` when above 1, else
the GPU count, else 1. The user's command runs as given in every rank. When the site names a
socket interface, mpirun's TCP transport and horovodrun's ``--network-interface`` use it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tacc_hub.compiler.plan import NodeLaunch
from tacc_hub.compiler.runtime import LaunchContext

from ._common import HOSTS_LIB, node_script, ranks_per_node

# $1 launcher, $2 ranks per node, $3 srun's --mpi, $4 socket interface ("" for none), then the command.
SCRIPT = HOSTS_LIB + """\
set -eo pipefail
launcher=$1; nproc=$2; mpi=$3; ifname=$4; shift 4
if [ "${TACC_NODE_RANK:-0}" != 0 ]; then
  echo "tacc: node ${TACC_NODE_RANK}: its ranks are started from node 0 by $launcher" >&2
  exit 0
fi
tacc_hosts
np=$(( ${#hosts[@]} * nproc ))
if [ "$launcher" = srun ]; then
  exec srun --overlap --nodes="${#hosts[@]}" --ntasks-per-node="$nproc" --mpi="$mpi" --kill-on-bad-exit=1 "$@"
fi
hostfile="${TACC_TASKDIR:-.}/hostfile"
tacc_hostfile "$hostfile" "$nproc"
if [ "$launcher" = horovodrun ]; then
  net=(); [ -z "$ifname" ] || net=(--network-interface "$ifname")
  exec horovodrun -np "$np" --hostfile "$hostfile" "${net[@]}" "$@"
fi
fwd=()
for v in $(compgen -e); do
  case $v in
    CUDA_VISIBLE_DEVICES|TACC_NODE_RANK|SLURM_*|PMI_*|PMIX_*|OMPI_*|BASH_FUNC_*|HOSTNAME|PWD|OLDPWD|SHLVL|_) ;;
    *) fwd+=(-x "$v") ;;
  esac
done
net=(); [ -z "$ifname" ] || net=(--mca btl_tcp_if_include "$ifname" --mca oob_tcp_if_include "$ifname")
exec mpirun -np "$np" --hostfile "$hostfile" --map-by slot --bind-to none "${net[@]}" "${fwd[@]}" "$@"
"""

SrunMpi = Literal["pmix", "pmi2"]


class MpiOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    nproc_per_node: int | None = Field(None, ge=1, le=256, description="Ranks per node (default: see the module).")
    launcher: Literal["mpirun", "srun"] = Field("mpirun", description="mpirun with a hostfile, or srun (Slurm).")
    srun_mpi: SrunMpi = Field("pmix", description="srun's --mpi plugin, with launcher srun.")


class HorovodOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    nproc_per_node: int | None = Field(None, ge=1, le=256, description="Ranks per node (default: see the module).")
    launcher: Literal["horovodrun", "mpirun", "srun"] = Field(
        "horovodrun", description="horovodrun or mpirun with a hostfile, or srun (Slurm)."
    )
    srun_mpi: SrunMpi = Field("pmix", description="srun's --mpi plugin, with launcher srun.")


def _launch(name: str, ctx: LaunchContext, opts: MpiOptions | HorovodOptions) -> NodeLaunch:
    nproc = ranks_per_node(ctx, opts.nproc_per_node)
    ifname = ctx.network.socket_ifname or ""
    if ifname.startswith(("^", "=")):
        ifname = ""  # an NCCL exclude/exact-match list is not an interface name for mpirun
    args = [opts.launcher, str(nproc), opts.srun_mpi, ifname, *ctx.user_argv]
    return NodeLaunch(argv=node_script(name, SCRIPT, args), procs_per_node=nproc)


class MpiRuntime:
    name = "mpi"
    options = MpiOptions

    def launch(self, ctx: LaunchContext, opts: MpiOptions) -> NodeLaunch:
        return _launch(self.name, ctx, opts)


class HorovodRuntime:
    name = "horovod"
    options = HorovodOptions

    def launch(self, ctx: LaunchContext, opts: HorovodOptions) -> NodeLaunch:
        return _launch(self.name, ctx, opts)
