"""Preparing a task's software and code before launch (I/O; runs in worker threads).

Invariants:
- One environment per dependency digest, built once, reused; a build is
  atomic (built in a temporary directory, renamed into place, then marked
  ready) and serialized by a file lock, so concurrent tasks and several
  service processes never see a half-built env.
- Every command is an argv list; requirements were validated as pinned
  specifiers by the schema and are passed after ``--`` where the tool allows.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tacc_hub.compiler.plan import CodePlan, EnvPlan, ExecutionPlan
from tacc_hub.snapshot import SnapshotError, unpack

from .base import Launch, LaunchError

READY = ".tacc-ready"
BUILD_TIMEOUT_S = 3600


def _run(argv: list[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"{what} failed: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip()[-2000:]
        raise LaunchError(f"{what} failed (exit {proc.returncode}): {tail}")


def ensure_env(env: EnvPlan) -> bool:
    """Build the environment unless it is ready; True when this call built it."""
    if env.kind == "base":
        if not Path(env.python).exists():
            raise LaunchError(f"the site's Python {env.python} does not exist")
        return False
    path = Path(env.path)
    if (path / READY).exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.parent / f".{path.name}.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (path / READY).exists():
            return False
        # Built in place (venv scripts embed their path); only the READY marker,
        # written last, makes it usable, and a leftover partial build is wiped.
        shutil.rmtree(path, ignore_errors=True)
        try:
            if env.kind == "venv":
                _build_venv(env, path)
            else:
                _build_conda(env, path)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        (path / READY).write_text(env.digest + "\n")
        return True


def _site_packages(prefix: Path) -> Path:
    found = sorted(prefix.glob("lib/python3*/site-packages"))
    if not found:
        raise LaunchError(f"no site-packages under {prefix}")
    return found[0]


def _build_venv(env: EnvPlan, tmp: Path) -> None:
    uv = shutil.which("uv") if env.builder == "uv" else None
    if uv:
        _run([uv, "venv", "--python", env.python, str(tmp)], "creating the environment")
    else:
        _run([env.python, "-m", "venv", "--without-pip", str(tmp)], "creating the environment")
    if env.inherit_packages:
        (_site_packages(tmp) / "_tacc_inherit.pth").write_text("\n".join(env.inherit_packages) + "\n")
    py = str(tmp / "bin" / "python")
    if uv:
        _run([uv, "pip", "install", "--python", py, *env.requirements], "installing requirements")
    else:
        # pip runs from the hub's interpreter and targets the env's interpreter.
        _run(
            [sys.executable, "-m", "pip", "--python", py, "install", "--disable-pip-version-check",
             "--no-input", *env.requirements],
            "installing requirements",
        )


def _build_conda(env: EnvPlan, tmp: Path) -> None:
    assert env.conda is not None and env.conda_command
    argv = [env.conda_command, "create", "--yes", "--prefix", str(tmp)]
    for ch in env.conda.channels:
        argv += ["--channel", ch]
    _run([*argv, *env.conda.dependencies], "creating the conda environment")


def owner_dir(root: Path, owner: str) -> Path:
    """``<root>/users/<owner>``: the owner's persistent directory (one path segment)."""
    # owner names are validated by the service (JupyterHub/standalone names); keep one path segment.
    safe = owner.replace("/", "_").replace("\x00", "_")
    if safe in ("", ".", ".."):
        raise LaunchError("invalid owner name")
    return root / "users" / safe


def prepare_task_dir(tdir: Path, launch: Launch, user_dir: Path, *, build_env: bool = True) -> Path:
    """Lay out ``tdir`` for a run: plan files, ``launch.sh``, ``work/`` (code), ``output.log``, ``checkpoint/``.

    Shared by the executors whose nodes see this machine's filesystem (local, Slurm). A run
    after a preemption keeps ``output.log`` (appended to) and ``checkpoint/``; everything else,
    including an ``exitcode`` of the earlier run, is removed first. ``build_env=False``: a venv or
    conda env is left to the job (the Slurm executor builds it on a node, see ``prepare_env``).
    """
    plan = launch.plan
    if tdir.exists():
        for entry in tdir.iterdir():
            if entry.name in ("output.log", "checkpoint"):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    tdir.mkdir(parents=True, exist_ok=True)
    (tdir / "checkpoint").mkdir(exist_ok=True)
    if build_env or plan.env.kind == "base":
        ensure_env(plan.env)
    materialize_code(plan.code, tdir / "work")
    (tdir / "work" / plan.workdir).mkdir(parents=True, exist_ok=True)
    for name, content in plan.files.items():
        (tdir / name).write_text(content)
    (tdir / "launch.sh").write_text(plan.script)
    (tdir / "output.log").touch()
    user_dir.mkdir(parents=True, exist_ok=True)
    return tdir


def task_env(launch: Launch, tdir: Path, user_dir: Path, grace_period: float) -> dict[str, str]:
    """The launch variables that do not depend on the node (see ``compiler.plan.LAUNCH_ENV``)."""
    return {
        "TACC_TASK_ID": str(launch.task_id),
        "TACC_TASKDIR": str(tdir),
        "TACC_WORKDIR": str(tdir / "work"),
        "TACC_USERDIR": str(user_dir),
        "TACC_CHECKPOINT_DIR": str(tdir / "checkpoint"),
        "TACC_ATTEMPT": str(launch.attempt),
        "TACC_PREEMPT_GRACE": f"{grace_period:g}",
        **({"TACC_DEADLINE": str(int(launch.deadline))} if launch.deadline is not None else {}),
        # an array's element (issue 20): the array's id; its index and parameters are in launch.sh (plan.array_env)
        **({"TACC_ARRAY_ID": str(int(launch.array_id))} if launch.array_id is not None else {}),
    }


def input_copies(plan: ExecutionPlan, tasks_root: Path) -> list[dict[str, str]]:
    """The copies a run makes of earlier tasks' files (``plan.inputs``), as the launcher and the batch script do them.

    Each: ``top`` (the work directory of task ``id`` under ``tasks_root``), ``path`` (the input's path in it),
    ``src`` (the two joined: it must resolve inside ``top``), ``dest`` (relative to this task's work
    directory), ``into`` ("1": ``dest`` is a directory the copy goes into, as each element of an array input;
    "": ``dest`` is the copy) and ``what`` (how its errors name it: ``input outputs/data of task 12``). Done
    as the task's user, before its program.
    """
    out: list[dict[str, str]] = []
    for inp in plan.inputs:
        if inp.task is not None:
            pairs: list[tuple[int | None, int]] = [(None, inp.task)]
        else:
            if not inp.tasks:
                raise LaunchError(f"input {inp.path} of array {inp.array}: its elements are not known")
            pairs = [(index, tid) for index, tid in inp.tasks]
        for index, tid in pairs:
            top = tasks_root / str(int(tid)) / "work"
            what = f"input {inp.path} of task {int(tid)}"
            if index is not None:
                what += f" (element {int(index)} of array {inp.array})"
            out.append({
                "src": str(top / inp.path), "top": str(top), "path": inp.path,
                "dest": inp.to if index is None else f"{inp.to}/{int(index)}",
                "into": "" if index is None else "1", "what": what,
            })
    return out


def materialize_code(code: CodePlan, dest: Path) -> None:
    """Lay the task's code out in ``dest`` (which must not exist yet or be empty)."""
    dest.mkdir(parents=True, exist_ok=True)
    if code.kind == "snapshot":
        assert code.archive is not None
        if not Path(code.archive).is_file():
            raise LaunchError(f"code snapshot {code.digest} is missing from the code store")
        try:
            unpack(code.archive, dest)
        except SnapshotError as exc:
            raise LaunchError(str(exc)) from exc
        return
    assert code.url is not None and code.commit is not None
    git_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": "https:http:ssh:git:file"}
    _run(["git", "clone", "--quiet", "--no-checkout", "--", code.url, str(dest)], "git clone", env=git_env)
    _run(["git", "-C", str(dest), "checkout", "--quiet", "--detach", code.commit, "--"], "git checkout", env=git_env)
    if code.patch:
        patch = dest.parent / "code.patch"
        patch.write_text(code.patch)
        _run(["git", "-C", str(dest), "apply", "--whitespace=nowarn", "--", str(patch)], "applying the patch")
