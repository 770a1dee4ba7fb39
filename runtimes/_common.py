"""Helpers shared by the runtime plugins (not a plugin).

``node_script`` builds the argv of a fixed bash script that does the per-node work a launcher
needs (choose a role by node rank, write a hostfile from ``TACC_NODELIST``...). The script is a
constant of the plugin; every value that may come from a user travels as a positional
argument (``"$@"``), never inside the script text, and launch.sh quotes both.
"""

from __future__ import annotations

from typing import Literal

from tacc_hub.compiler.plan import Arg
from tacc_hub.compiler.runtime import LaunchContext

PythonMode = Literal["script", "module", "exec"]

# Bash functions the node scripts share. ``tacc_hosts`` fills the array ``hosts`` with this
# task's node names in node-rank order (TACC_NODELIST; one node: this host); ``tacc_hostfile
# FILE SLOTS`` writes an MPI-style hostfile (``host slots=N`` lines) from them.
HOSTS_LIB = """\
tacc_hosts() {
  if [ -n "${TACC_NODELIST:-}" ]; then
    IFS=, read -r -a hosts <<< "$TACC_NODELIST"
  elif [ "${TACC_NNODES:-1}" = 1 ]; then
    hosts=(localhost)
  else
    echo "tacc: TACC_NODELIST is not set (the executor must list the nodes)" >&2
    exit 3
  fi
  if [ "${#hosts[@]}" != "${TACC_NNODES:-1}" ]; then
    echo "tacc: TACC_NODELIST names ${#hosts[@]} nodes, TACC_NNODES is ${TACC_NNODES:-1}" >&2
    exit 3
  fi
}
tacc_hostfile() {
  tacc_hosts
  : > "$1.tmp"
  for h in "${hosts[@]}"; do printf "%s slots=%s\\n" "$h" "$2" >> "$1.tmp"; done
  mv -f -- "$1.tmp" "$1"
}
"""


def ranks_per_node(ctx: LaunchContext, nproc_per_node: int | None) -> int:
    """``options.nproc_per_node``, else ``tasks_per_node`` when above 1, else the GPU count, else 1."""
    return nproc_per_node or (ctx.tasks_per_node if ctx.tasks_per_node > 1 else max(ctx.gpus_per_node, 1))


def python_mode(ctx: LaunchContext) -> tuple[PythonMode, list[Arg]]:
    """How a Python launcher (torchrun, deepspeed) should start the user's command in every rank.

    ``python -m pkg args`` -> ("module", [pkg, args]); ``python train.py args`` -> ("script",
    [train.py, args]); ``train.py args`` -> ("script", as is); anything else (a shell
    entrypoint, ``python -u ...``, ``python -c ...``, another program) -> ("exec", as is): the
    launcher runs it without adding an interpreter, and does not read ``-u`` as its own option.
    """
    argv = list(ctx.user_argv)
    first = argv[0] if argv else ""
    second = argv[1] if len(argv) > 1 else ""
    if not ctx.shell and first in ("python", "python3") and second == "-m" and len(argv) > 2:
        return "module", argv[2:]
    if (not ctx.shell and first in ("python", "python3") and isinstance(second, str)
            and second and not second.startswith("-")):
        return "script", argv[1:]
    if ctx.shell or not (isinstance(first, str) and first.endswith(".py")):
        return "exec", argv
    return "script", argv


def node_script(name: str, script: str, args: list[Arg]) -> list[Arg]:
    """argv running the fixed bash ``script`` with ``args`` as ``$1...`` (``$0`` is ``tacc-<name>``)."""
    return ["bash", "-c", script, f"tacc-{name}", *args]
