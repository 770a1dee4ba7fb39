"""Running a command inside a running Slurm task: ``srun --jobid=J --overlap`` on its first node, as its owner.

The step runs as the job's owner (``runuser -u``/``sudo -n -u``, as ``scancel`` does), on the task's first
node in Slurm's order (its rank 0), in the task's working directory, with ``--pty`` for a terminal. The
overlapping step asks for the job's GPUs on that node (``--gres=gpu:N``), so Slurm gives it the same
``CUDA_VISIBLE_DEVICES`` as the task's own step.

The task's launch variables (``TACC_*`` and the site's extras) are the ``export`` lines of the task's
batch script (``job.sbatch``, read without following a link, only as a regular file of the job's uid;
its owner may have changed it, but then only their own command sees it), plus the node variables the
script computes (``TACC_NODELIST``, ``TACC_NNODES``, ``TACC_NODE_RANK`` 0, ``TACC_MASTER_ADDR``).
Then the unconditional ``export`` lines of its ``launch.sh`` (``launcher.execute.script_exports``: its
own variables, its venv's or conda env's PATH), as for a local task. No argv (a terminal session): the
account's login shell (``-l``).

No shell and no quoting: srun's ``--export`` cannot carry values with commas, so the variables and the
user's argv travel as one JSON argument of a small fixed Python program (``NODE_PROGRAM``) that adds
the variables to the step's environment and ``execvpe``s the argv as given (a first item that looks
like ``NAME=VALUE`` stays a command, unlike with ``env``).
"""

from __future__ import annotations

import json
import pwd
import re
import shlex
from typing import TYPE_CHECKING, Any

from ..launcher.execute import script_exports
from ..scheduler.cluster import Placement
from .base import ExecUnsupported
from .slurm_files import read_job_file

if TYPE_CHECKING:
    from .slurm import SlurmExecutor

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
SCRIPT_LIMIT = 1 << 20
WORKDIR_LINE = 'cd -- "${TACC_WORKDIR}"'

# Run on the node by the step, as the owner: argv[1] is {"env": {...}, "argv": [...]}.
NODE_PROGRAM = (
    "import json,os,sys\n"
    "d=json.loads(sys.argv[1]);e=dict(os.environ);e.update(d['env']);a=d['argv']\n"
    "try:\n"
    " os.execvpe(a[0],a,e)\n"
    "except FileNotFoundError:\n"
    " sys.stderr.write(a[0][:200]+': command not found\\n');sys.exit(127)\n"
    "except PermissionError:\n"
    " sys.stderr.write(a[0][:200]+': permission denied\\n');sys.exit(126)\n"
)


def _natural(name: str) -> list[Any]:
    """Slurm's hostlist order: n2 before n10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def script_env(text: str) -> dict[str, str]:
    """The ``export NAME=VALUE`` lines at the top of a batch script (``sbatch.render_batch``), values unquoted."""
    env: dict[str, str] = {}
    for line in text.splitlines()[1:]:
        if line.startswith("#"):
            continue
        if not line.startswith("export "):
            break  # the fixed body begins
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if len(words) != 2 or "=" not in words[1]:
            continue
        name, value = words[1].split("=", 1)
        if ENV_NAME.fullmatch(name) and "\0" not in value:
            env[name] = value
    return env


def script_workdir(text: str) -> str:
    """The working directory (relative to ``work/``) that ``launch.sh`` enters (``compiler.render``)."""
    for line in text.splitlines():
        if line.startswith(WORKDIR_LINE):
            rest = line[len(WORKDIR_LINE):]
            if not rest:
                return "."
            try:
                words = shlex.split(rest)
            except ValueError:
                return "."
            if len(words) == 1 and words[0].startswith("/"):
                parts = [p for p in words[0].split("/") if p not in ("", ".")]
                if ".." not in parts:
                    return "/".join(parts) or "."
            return "."
    return "."


def login_shell(uid: int) -> str:
    """The account's login shell as this machine's passwd names it (the nodes share the accounts), else bash."""
    try:
        shell = pwd.getpwuid(uid).pw_shell
    except KeyError:
        return "bash"
    if not shell or not shell.startswith("/") or shell.endswith(("nologin", "false")):
        return "bash"
    return shell


def slurm_exec_argv(ex: SlurmExecutor, task_id: int, state: dict[str, Any], placement: Placement | None,
                    argv: list[str], *, tty: bool) -> list[str]:
    """The ``srun`` command (argv) that runs ``argv`` in the task's job (see the module's docstring)."""
    job_id = str(state.get("job_id", ""))
    if not job_id.isdigit():
        raise ExecUnsupported("the task has no Slurm job to run the command in")
    if placement is None or not placement.nodes:
        raise ExecUnsupported("the task has no placement")
    uid = ex._uid(state)
    if not argv:
        argv = [login_shell(uid), "-l"]
    tdir = ex.task_dir(task_id)
    nodes = sorted((n.node for n in placement.nodes), key=_natural)
    first = nodes[0]
    gpus = next(len(n.gpus) for n in placement.nodes if n.node == first)
    env = {**ex.extra_env,
           "TACC_TASK_ID": str(int(task_id)), "TACC_TASKDIR": str(tdir), "TACC_WORKDIR": str(tdir / "work"),
           "TACC_CHECKPOINT_DIR": str(tdir / "checkpoint")}
    env.update(script_env(read_job_file(str(tdir / "job.sbatch"), uid, SCRIPT_LIMIT) or ""))
    try:
        master = ex.task_host(task_id, state, placement)
    except Exception:  # the address is a convenience; the node name works as well
        master = first
    env.update(TACC_NODELIST=",".join(nodes), TACC_NNODES=str(len(nodes)), TACC_NODE_RANK="0",
               TACC_MASTER_ADDR=master)
    if tty:
        env.setdefault("TERM", "xterm-256color")
    launch_sh = read_job_file(str(tdir / "launch.sh"), uid, SCRIPT_LIMIT) or ""
    env = script_exports(launch_sh, {**ex._env(), **env})  # the task's own variables, its venv's PATH
    workdir = script_workdir(launch_sh)
    cwd = tdir / "work" if workdir == "." else tdir / "work" / workdir
    payload = json.dumps({"env": env, "argv": list(argv)})
    user = state.get("user") if isinstance(state.get("user"), str) else None
    return ex._argv(
        "srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={first}",
        f"--chdir={cwd}", *([f"--gres=gpu:{gpus}"] if gpus else []), "--quiet",
        *(["--pty"] if tty else []),
        ex.node_python, "-I", "-S", "-c", NODE_PROGRAM, payload,
        user=user or ex.submit_as)
