"""Rendering ``launch.sh``, the script every node runs for a task.

Invariants: pure; every value that came from a user is passed through
``shlex.quote`` (or is a validated variable name); launch-time values are
only ever referenced as ``"${VAR}"``. The output is byte-for-byte stable and
is checked against golden files in ``tests/golden``.

Before it execs the task's program, node rank 0 marks a later run in the log
(``TACC_ATTEMPT`` > 0: one ``=== tacc: attempt N ... ===`` line, so a restarted or
preempted task's log reads as one log with its runs marked) and, for a spec with
``tensorboard``, starts TensorBoard in the background as the task's user: on
``TACC_MASTER_ADDR`` (node rank 0's address; the loopback on the local executor) and
``TACC_TENSORBOARD_PORT``, its output in ``TACC_TASKDIR/tensorboard.log``. Its lifetime is the
task's: the executor ends every process of the task when the program ends.

TensorBoard has no authentication, and any user of the node (or, on Slurm, of the cluster's
network) can connect to its port. So it serves only under a secret path prefix,
``--path_prefix=/<TACC_TENSORBOARD_SECRET>`` (a random token the executor makes per run and keeps in
the task's state, which the proxy adds to each request; anything else gets 404). The secret is
never on a command line (``/proc/PID/cmdline`` and ``ps`` are world-readable; a process's
environment is not): the site's ``tensorboard_command`` is a Python interpreter (a trailing
``-m tensorboard.main`` or ``-m tensorboard`` is dropped), run with ``-c TENSORBOARD_MAIN``, a fixed
program that takes the secret out of its environment, adds the flag to its own ``sys.argv``
only, keeps its info file (which records its arguments) in the private ``TACC_TASKDIR`` with
umask 077, masks the secret in its output, and runs ``tensorboard.main.run_main`` (the
``tensorboard`` console script's entry point). The secret is then unset before the
program runs, on every node, so the task's own processes (and its log, should it print its
environment) do not have it.
"""

from __future__ import annotations

import re
import shlex

from .plan import Arg, EnvPlan, EnvRef, NodeLaunch, TensorBoardPlan

q = shlex.quote


def render_arg(arg: Arg) -> str:
    if isinstance(arg, EnvRef):
        return f'"${{{arg.env}}}"' + (q(arg.suffix) if arg.suffix else "")
    return q(arg)


def _env_lines(env: EnvPlan) -> list[str]:
    if env.kind == "base":
        return [f"export PATH={q(env.path + '/bin')}:\"$PATH\""]
    if env.kind == "venv":
        return [f"export VIRTUAL_ENV={q(env.path)}", 'export PATH="$VIRTUAL_ENV/bin:$PATH"']
    return [f"export CONDA_PREFIX={q(env.path)}", 'export PATH="$CONDA_PREFIX/bin:$PATH"']


def _with_task_id(path: str) -> str:
    """``path`` as a shell word, sbatch's ``%j`` as the task id and ``%%`` as ``%`` (TACC's default log is
    ``${TACC_SLURM_USERLOG}/slurm-%j.out``: one file per job, not one shared by all)."""
    words, literal = [], ""
    for part in re.split(r"(%%|%j)", path):
        if part == "%j":
            words += [q(literal)] if literal else []
            words.append('"${TACC_TASK_ID}"')
            literal = ""
        else:
            literal += "%" if part == "%%" else part
    return "".join(words + ([q(literal)] if literal else []))


def _user_log_lines(path: str) -> list[str]:
    """Tee the task's output into ``${TACC_USERDIR}/path`` as well, unless that resolves outside the directory.

    Resolved at run time (``realpath``), so a symbolic link in the owner's directory cannot lead it out; it runs
    as the task itself, so it can write nothing the task could not.
    """
    rel = q(path)
    return [
        "tacc_log=''  # user_log_file: the output also goes to a file in ${TACC_USERDIR}",
        'if tacc_root="$(realpath -e -- "${TACC_USERDIR}")"; then',
        f'  tacc_log="$(realpath -m -- "${{tacc_root}}"/{_with_task_id(path)})"',
        '  case "${tacc_log}" in "${tacc_root}"/*) ;; *) tacc_log="" ;; esac',
        "fi",
        'if [ -n "${tacc_log}" ] && mkdir -p -- "$(dirname -- "${tacc_log}")"; then',
        '  exec > >(tee -a -- "${tacc_log}") 2>&1',
        "else",
        f"  echo 'tacc: the output is not written to TACC_USERDIR/'{rel}': that path leaves the directory' >&2",
        "fi",
    ]


TENSORBOARD_LOG = "tensorboard.log"  # in TACC_TASKDIR: TensorBoard's own output, apart from the task's

# A later run (TACC_ATTEMPT a positive number, set by the executor) is marked in the log, by node rank 0 only.
_ATTEMPT_MARK = [
    'case "${TACC_NODE_RANK:-0}:${TACC_ATTEMPT:-0}" in  # a later run of the task (restarted, preempted): mark it',
    "  0:0 | 0:*[!0-9]* | 0:) ;;",
    "  0:*) echo \"=== tacc: attempt $((TACC_ATTEMPT + 1)) (TACC_ATTEMPT=${TACC_ATTEMPT}) started at"
    " $(date -u '+%Y-%m-%d %H:%M:%S UTC') ===\" ;;",
    "esac",
]


# TensorBoard's main, as ``python -c`` runs it: fixed text (no value of the task's or the site's in it, no single
# quote); its arguments follow. The secret comes from the environment and goes into this process's sys.argv only.
TENSORBOARD_MAIN = """\
import sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # no module from the working directory
import os, tempfile
k = os.environ.pop("TACC_TENSORBOARD_SECRET", "")
if len(k) < 16 or not k.isascii() or not k.replace("-", "").replace("_", "").isalnum():
    sys.exit("tacc: TensorBoard was not started: the executor gave it no secret path (TACC_TENSORBOARD_SECRET)")
os.umask(0o077)
tempfile.tempdir = os.environ.get("TACC_TASKDIR") or None
class Masked:
    def __init__(self, w): self.w = w
    def write(self, t): return self.w.write(t.replace(k, "SECRET") if isinstance(t, str) else t)
    def __getattr__(self, n): return getattr(self.w, n)
sys.stdout, sys.stderr = Masked(sys.stdout), Masked(sys.stderr)
sys.argv[1:] = [*sys.argv[1:], "--path_prefix=/" + k]
from tensorboard.main import run_main
run_main()
"""
PYTHON_MODULE_SUFFIXES = (("-m", "tensorboard.main"), ("-m", "tensorboard"))


def tensorboard_python(command: list[str]) -> list[str]:
    """The Python interpreter words of a site's ``tensorboard_command`` (a trailing ``-m tensorboard.main``
    or ``-m tensorboard`` dropped: TENSORBOARD_MAIN runs that module's main)."""
    for suffix in PYTHON_MODULE_SUFFIXES:
        if len(command) > len(suffix) and tuple(command[-len(suffix):]) == suffix:
            return list(command[:-len(suffix)])
    return list(command)


def _tensorboard_lines(tb: TensorBoardPlan) -> list[str]:
    """Start TensorBoard in the background on node rank 0, when its Python is on the PATH and a port was given;
    then (every node) unset its secret, so the task's program does not inherit it."""
    python = tensorboard_python(tb.command)
    cmd = " ".join(q(w) for w in python)
    return [
        'if [ "${TACC_NODE_RANK:-0}" = 0 ]; then  # TensorBoard beside the task (spec: tensorboard), on node rank 0',
        '  if [ -z "${TACC_TENSORBOARD_PORT:-}" ]; then',
        "    echo 'tacc: TensorBoard was not started: this executor gave it no port' >&2",
        f"  elif ! command -v -- {q(python[0])} >/dev/null 2>&1; then",
        f"    printf 'tacc: TensorBoard was not started: %s is not on the PATH of the task\\n' {q(python[0])} >&2",
        "  else",
        f"    printf 'tacc: TensorBoard on port %s, reading %s (its output: %s)\\n' \"${{TACC_TENSORBOARD_PORT}}\" "
        f"{q(tb.logdir)} {TENSORBOARD_LOG}",
        f"    {cmd} -c {q(TENSORBOARD_MAIN)} \\",
        f'      --logdir "${{TACC_WORKDIR}}"/{q(tb.logdir)} --host "${{TACC_MASTER_ADDR}}" \\',
        f'      --port "${{TACC_TENSORBOARD_PORT}}" </dev/null >>"${{TACC_TASKDIR}}"/{TENSORBOARD_LOG} 2>&1 &',
        "  fi",
        "fi",
        "unset TACC_TENSORBOARD_SECRET  # TensorBoard's alone: not the program's",
    ]


def render_script(
    *,
    name: str,
    task_digest: str,
    env: EnvPlan,
    variables: dict[str, str],
    modules: list[str],
    datasets: dict[str, str],
    workdir: str,
    launch: NodeLaunch,
    user_log: str | None = None,
    tensorboard: TensorBoardPlan | None = None,
    array_env: dict[str, str] | None = None,
) -> str:
    lines = [
        "#!/usr/bin/env bash",
        f"# launch.sh for task {q(name)} (spec {task_digest[:16]}), generated by tacc_hub; do not edit.",
        "# Set by the executor: TACC_TASK_ID TACC_TASKDIR TACC_WORKDIR TACC_USERDIR TACC_NODE_RANK",
        "#   TACC_NNODES TACC_MASTER_ADDR TACC_MASTER_PORT CUDA_VISIBLE_DEVICES",
        "set -eo pipefail",
        "export PYTHONUNBUFFERED=1",
    ]
    for key in sorted(variables):
        lines.append(f"export {key}={q(variables[key])}")
    if array_env:  # an array element: its index and parameters, as text (quoted), and params.json beside launch.sh
        for key in sorted(array_env):
            lines.append(f"export {key}={q(array_env[key])}")
        lines.append('export TACC_PARAMS_FILE="${TACC_TASKDIR}"/params.json')
    for mod in modules:
        lines.append(f"module load {q(mod)}")
    lines += _env_lines(env)
    if datasets:
        lines.append('mkdir -p -- "${TACC_WORKDIR}/datasets"')
        for ds in sorted(datasets):
            lines.append(f'ln -sfn -- {q(datasets[ds])} "${{TACC_WORKDIR}}/datasets/"{q(ds)}')
    for key in sorted(launch.env):
        lines.append(f"export {key}={q(launch.env[key])}")
    for key in sorted(launch.env_from):
        lines.append(f'export {key}="${{{launch.env_from[key]}}}"')
    if launch.rdma_required or launch.cross_switch_env:
        lines.append('if [ "${TACC_CROSS_SWITCH:-0}" = 1 ]; then  # the nodes span switches: no RDMA path between them')
        if launch.rdma_required:
            lines.append("  echo 'tacc: network.rdma is required but the placement spans switches' >&2")
            lines.append("  exit 3")
        else:
            for key in sorted(launch.cross_switch_env):
                lines.append(f"  export {key}={q(launch.cross_switch_env[key])}")
        lines.append("fi")
    lines.append('cd -- "${TACC_WORKDIR}"' + ("" if workdir == "." else "/" + q(workdir)))
    if user_log is not None:
        lines += _user_log_lines(user_log)
    lines += _ATTEMPT_MARK
    if tensorboard is not None:
        lines += _tensorboard_lines(tensorboard)
    lines.append("exec " + " ".join(render_arg(a) for a in launch.argv))
    return "\n".join(lines) + "\n"
