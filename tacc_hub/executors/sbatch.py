"""Rendering a task's Slurm batch job: the ``sbatch`` options and the batch script.

Invariants: pure (same inputs, same bytes; checked against ``tests/golden/slurm-*.sbatch``).
The options are an argv list handed to ``sbatch`` without a shell; they are *not* written as
``#SBATCH`` lines, because sbatch's own parser of those lines knows double quotes but not shell
quoting, so a path with a space or a quote could not be expressed safely there. The script is
run by bash: every value in it is passed through ``shlex.quote`` (the options are also listed in
a comment, as JSON, which has no line breaks); the rest is fixed text.

What the job asks for is exactly the placement our scheduler chose: ``--nodelist`` of its nodes,
``--nodes``, one task per node and ``--gres=gpu:N`` per node. Slurm 22.05 cannot be told *which*
GPU indices to use on a node: our placement decides the nodes and the GPU count per node, and
Slurm picks the device indices on each node (it sets ``CUDA_VISIBLE_DEVICES``). Node ranks
follow Slurm's node order (``SLURM_NODEID``), and rank 0 is the first node of the allocation.

A task with ``inputs`` copies them first, on the batch host as its user (``_INPUT_FUNCTION``); a missing
one ends the job with exit status 1 and says so in the task's log. A task whose env must be built first
gets one more step before its own: ``prepare_env`` as one
task on the first node (``env_step``); when it fails, its exit code is the task's and the task
does not run.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tacc_hub.compiler.plan import ExecutionPlan
from tacc_hub.scheduler.cluster import Placement

from .base import LaunchError
from .prepare import input_copies

q = shlex.quote
SLURM_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")  # an account or QOS name we pass to sbatch

# The fixed part that runs on the batch host (the allocation's first node; a one-node job is
# that node, and needs no hostlist expansion: one process less on every start). One srun task per
# node runs launch.sh with that node's rank; the exit code file is written last, so that
# "exitcode exists" means the task and its log copy are done (as with the local supervisor).
# The job id in ``job`` says whose run the directory holds (see the Slurm executor's docstring).
_BODY = """\
if [ "$SLURM_NNODES" = 1 ]; then
  TACC_NODELIST="$SLURMD_NODENAME"
else
  TACC_NODELIST=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)
fi
export TACC_NODELIST
TACC_MASTER_NODE="${TACC_NODELIST%%,*}"
TACC_MASTER_ADDR=$(scontrol -o show node "$TACC_MASTER_NODE" | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p')
export TACC_MASTER_ADDR="${TACC_MASTER_ADDR:-$TACC_MASTER_NODE}"
export TACC_NNODES="$SLURM_NNODES"
cd -- "$TACC_TASKDIR" || exit 111
printf '%s\\n' "$SLURM_JOB_ID" > job
rm -f -- exitcode exitcode.tmp
"""

# Copies an earlier task's files into the work directory (spec ``inputs``; ``prepare.input_copies``), on the batch
# host, as the task's user, before any step starts: TOP/PATH must resolve inside TOP (its task's work directory), the
# destination inside TACC_WORKDIR; links inside a copied tree stay links (cp -a). INTO: DEST is a directory the copy
# goes into (an array's element); else DEST is the copy. Plain copies, not hard links: the task may rewrite a file
# in place, which must not change the earlier task's outputs.
_INPUT_FUNCTION = """tacc_input() {  # TOP PATH DEST WHAT INTO
  local src top work dest
  top="$(realpath -e -- "$1" 2>/dev/null)" && src="$(realpath -e -- "$1/$2" 2>/dev/null)" \\
    || { echo "tacc: $4 is missing; the task did not run" >&2; return 1; }
  case "$src" in "$top" | "$top"/*) ;; *) echo "tacc: $4 leads out of its task's work directory" >&2; return 1 ;; esac
  work="$(realpath -e -- "$TACC_WORKDIR")" && dest="$(realpath -m -- "$work/$3")" || return 1
  case "$dest" in "$work"/*) ;; *) echo "tacc: $4: its destination leaves the work directory" >&2; return 1 ;; esac
  if [ -n "$5" ]; then
    mkdir -p -- "$dest" || return 1
    [ -d "$src" ] || dest="$dest/$(basename -- "$src")"
  else
    mkdir -p -- "$(dirname -- "$dest")" || return 1
  fi
  if [ -d "$src" ]; then
    mkdir -p -- "$dest" && cp -a -- "$src"/. "$dest"/ || { echo "tacc: $4 could not be copied" >&2; return 1; }
  else
    cp -a -- "$src" "$dest" || { echo "tacc: $4 could not be copied" >&2; return 1; }
  fi
}"""

# Writes "$rc" to ``exitcode``, only while the task dir is still this job's: a job whose node
# failed may end after the task's next run has started (its processes outlive their slurmd); it
# must not end that run.
_WRITE_EXITCODE = (
    '[ "$(cat job 2>/dev/null)" = "$SLURM_JOB_ID" ] && printf \'%s\\n\' "$rc" > exitcode.tmp \\',
    '  && [ "$(cat job 2>/dev/null)" = "$SLURM_JOB_ID" ] && mv -f exitcode.tmp exitcode',
)

_SRUN_CMD = "bash -c 'export TACC_NODE_RANK=\"$SLURM_NODEID\"; exec bash ./launch.sh'"


@dataclass(frozen=True, slots=True)
class BatchJob:
    options: list[str]  # sbatch options, in order (argv; no shell)
    script: str  # the batch script (bash); its fourth line lists the options as JSON


def time_option(seconds: int) -> str:
    """Slurm's --time in whole minutes (its granularity), rounded up; at least one."""
    return str(max(1, math.ceil(seconds / 60)))


def gpus_per_node(placement: Placement) -> int:
    counts = {len(n.gpus) for n in placement.nodes}
    if len(counts) != 1:
        raise LaunchError("a Slurm job gives every node the same GPU count; this placement does not "
                          f"({', '.join(f'{n.node}: {len(n.gpus)}' for n in placement.nodes)})")
    return counts.pop()


def mapped_name(kind: str, mapping: Mapping[str, str], group: str) -> str | None:
    """The Slurm ``kind`` (account, QOS) of tacc group ``group`` through the site's ``mapping``: its entry, else
    the ``'*'`` one; ``{group}`` in it is the group's name; no entry (or an empty one): None, no option.
    Anything but a plain Slurm name (letters, digits, '_', '-', '.') is refused with LaunchError."""
    value = mapping.get(group) if group in mapping else mapping.get("*")
    if not value:
        return None
    value = str(value).replace("{group}", group)
    if not SLURM_NAME.fullmatch(value):
        raise LaunchError(f"the Slurm {kind} for group {group[:64]!r} would be {value[:80]!r}, not a valid Slurm "
                          "name (letters, digits, '_', '-', '.'): ask the site to fix its configuration")
    return value


def prepare_env_argv(python: str, pythonpath: str, plan_file: Path) -> list[str]:
    """The command of the job step that builds (or finds ready) the task's env (see ``prepare_env``)."""
    return ["env", f"PYTHONPATH={pythonpath}", python, "-m", "tacc_hub.executors.prepare_env", str(plan_file)]


def input_lines(plan: ExecutionPlan, tasks_root: Path) -> list[str]:
    """The batch script's lines that copy the plan's inputs (none without inputs); a failed copy ends the job (1)."""
    copies = input_copies(plan, tasks_root)
    if not copies:
        return []
    lines = [_INPUT_FUNCTION]
    for c in copies:
        call = " ".join(q(c[k]) for k in ("top", "path", "dest", "what", "into"))
        lines += [f"tacc_input {call} || {{", "  rc=1", *("  " + line for line in _WRITE_EXITCODE), '  exit "$rc"',
                  "}"]
    return lines


def render_batch(
    *,
    task_id: int,
    plan: ExecutionPlan,
    placement: Placement,
    task_dir: Path,
    env: dict[str, str],
    partition: str | None = None,
    env_step: list[str] | None = None,
    account: str | None = None,
    qos: str | None = None,
) -> BatchJob:
    """The batch job of one run of a task. ``env``: the launch variables (and site extras) to export.

    ``env_step``: a command (argv) run first, as a one-task step on the first node, to build the
    task's environment (``prepare_env_argv``); when it fails the task ends with its exit code.
    ``account``, ``qos``: Slurm's ``--account`` and ``--qos`` (see ``mapped_name``), checked again here.
    """
    if not placement.nodes:
        raise LaunchError("empty placement")
    gpus = gpus_per_node(placement)
    res = plan.resources
    cpus = res.cpus_per_task * plan.procs_per_node  # one Slurm task per node starts all its ranks
    options = [
        f"--job-name=tacc-{int(task_id)}",
        f"--nodes={len(placement.nodes)}",
        f"--nodelist={','.join(n.node for n in placement.nodes)}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus}",
    ]
    if gpus:
        options.append(f"--gres=gpu:{gpus}")
    options.append(f"--time={time_option(res.time_limit)}")
    part = res.partition or partition
    if part:
        options.append(f"--partition={part}")
    for kind, value in (("account", account), ("qos", qos)):
        if value is not None:
            if not SLURM_NAME.fullmatch(value):
                raise LaunchError(f"invalid Slurm {kind} {value[:80]!r}")
            options.append(f"--{kind}={value}")
    if res.memory:
        options.append(f"--mem={int(res.memory)}M")
    options += [
        f"--output={task_dir / 'output.log'}",
        "--open-mode=append",
        f"--chdir={task_dir}",
        "--export=ALL",  # the submitting environment: scrubbed by the executor (env_keep)
        "--no-requeue",  # our scheduler requeues (it must know where a task runs)
    ]

    lines = [
        "#!/bin/bash",
        f"# Slurm batch script of tacc task {int(task_id)}, generated by tacc_hub; do not edit.",
        "# The sbatch options travel on its command line (see tacc_hub/executors/sbatch.py):",
        "# " + json.dumps(options),
        f"export TACC_TASK_NAME={q(plan.name)}",
    ]
    for key in sorted(env):
        if not key.replace("_", "A").isalnum() or key[0].isdigit():
            raise LaunchError(f"invalid environment variable name {key[:80]!r}")
        lines.append(f"export {key}={q(env[key])}")
    lines.append(_BODY.rstrip("\n"))
    lines += input_lines(plan, task_dir.parent)
    if env_step:
        step = " ".join(q(a) for a in env_step)
        lines += [
            f"srun --nodes=1 --ntasks=1 --cpus-per-task={cpus} --kill-on-bad-exit=1 --export=ALL {step}",
            "rc=$?",
            'if [ "$rc" -ne 0 ]; then',
            "  echo \"tacc: the environment could not be prepared (exit $rc); the task did not run\" >&2",
            *("  " + line for line in _WRITE_EXITCODE),
            '  exit "$rc"',
            "fi",
        ]
    srun = ['srun --nodes="$SLURM_NNODES" --ntasks-per-node=1', f"--cpus-per-task={cpus}",
            "--kill-on-bad-exit=1 --export=ALL"]
    if gpus:
        srun.append(f"--gres=gpu:{gpus}")
    lines.append(" ".join([*srun, _SRUN_CMD]))
    lines.append("rc=$?")
    if plan.log_file:
        dest = '"$TACC_WORKDIR"/' + q(plan.log_file)
        lines.append(f'mkdir -p -- "$(dirname -- {dest})" && cp -- output.log {dest}')
    lines += [
        *_WRITE_EXITCODE,
        'exit "$rc"',
    ]
    return BatchJob(options=options, script="\n".join(lines) + "\n")
