"""Laying out a task's directory, as its user: code (checked against its sha256), plan files, env.

Root does only two things here: it creates the task's directories (task dir, user dir, env dir)
inside directories the service owns, and it opens the code archive with the service's rights. All
the rest runs in a forked child that has dropped root for good (``drop_to``), with the task's own
scrubbed environment, so pip building an sdist, git, or a link left in the directory by an earlier
run can only do what the task's user could do anyway. That includes copying the task's ``inputs``
(files of the owner's earlier tasks) into ``work/``, once, before the program starts.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from .cli import DIR_FLAGS, Refused, as_caller

GIT_TIMEOUT_S = 3600


def drop_to(account: dict[str, Any] | None) -> None:
    """Become the task's user for good (no-op without an account: the caller's own identity)."""
    if account is None:
        return
    os.setgroups(account["groups"])
    os.setgid(account["gid"])
    os.setuid(account["uid"])
    if os.getuid() == 0 or os.geteuid() == 0:
        raise Refused("could not drop root")


def owned_dir(path: str, account: dict[str, Any] | None, mode: int, group: int | None = None) -> int:
    """Fd of directory ``path`` owned by the account, created by root inside a parent the service owns.

    The parent must be a directory owned by root or the caller, writable by nobody else; ``path`` must
    not be a link; an existing one must already belong to the account (an earlier run of the task).
    """
    parent, name = os.path.split(os.path.normpath(path))
    if not os.path.isabs(path) or name in ("", ".", ".."):
        raise Refused(f"bad directory {path!r}")
    pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        st = os.fstat(pfd)
        want = os.geteuid() if account is None else account["uid"]
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise Refused(f"{parent} is writable by others")
        created = False
        try:
            os.mkdir(name, 0o700, dir_fd=pfd)
            created = True
        except FileExistsError:
            pass
        fd = os.open(name, DIR_FLAGS, dir_fd=pfd)
    finally:
        os.close(pfd)
    st = os.fstat(fd)
    if not created and st.st_uid != want:
        os.close(fd)
        raise Refused(f"{path} belongs to uid {st.st_uid}, not to the task's user (uid {want})")
    if created or group is not None:
        if account is not None:
            os.fchown(fd, account["uid"], account["gid"] if group is None else group)
        os.fchmod(fd, mode)
    return fd


def _rm(name: str) -> None:
    st = os.lstat(name)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name)
    else:
        os.unlink(name)


def _git(argv: list[str], env: dict[str, str]) -> None:
    git_env = {**env, "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": "https:http:ssh:git:file"}
    proc = subprocess.run(argv, env=git_env, capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise Refused(f"{argv[1]} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-1500:]}")


def _code(code: dict[str, Any], archive_fd: int | None, env: dict[str, str]) -> None:
    os.mkdir("work", 0o755)
    if code["kind"] == "snapshot":
        from tacc_hub.snapshot import SnapshotError, unpack_verified

        assert archive_fd is not None
        try:
            with os.fdopen(archive_fd, "rb") as fh:
                unpack_verified(fh, str(code["digest"]), Path("work"))
        except SnapshotError as exc:
            raise Refused(str(exc)) from exc
        return
    _git(["git", "clone", "--quiet", "--no-checkout", "--", str(code["url"]), "work"], env)
    _git(["git", "-C", "work", "checkout", "--quiet", "--detach", str(code["commit"]), "--"], env)
    if code.get("patch"):
        with open("code.patch", "w") as fh:
            fh.write(str(code["patch"]))
        _git(["git", "-C", "work", "apply", "--whitespace=nowarn", "--", "../code.patch"], env)


def _build_env(env_plan: dict[str, Any]) -> None:
    from tacc_hub.compiler.plan import EnvPlan
    from tacc_hub.executors.base import LaunchError
    from tacc_hub.executors.prepare import ensure_env

    try:
        ensure_env(EnvPlan.model_validate(env_plan))
    except LaunchError as exc:
        raise Refused(str(exc)) from exc


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _copy_inputs(inputs: list[dict[str, str]]) -> None:
    """Copy earlier tasks' files into ``work/`` (spec ``inputs``; see ``executors.prepare.input_copies``), as the
    task's user (this runs in the child that dropped root): it reads only what that user may read.

    A source must resolve (links followed) inside its task's work directory, and a destination inside this
    task's; links inside a copied tree are copied as links, never followed. A missing source ends the
    preparation, with ``tacc: <what> is missing`` in the task's log and as the reason.
    """
    work = os.path.realpath("work")
    for inp in inputs:
        what, top = str(inp["what"]), os.path.realpath(str(inp["top"]))
        src = os.path.realpath(str(inp["src"]))
        problem = None
        if not os.path.isdir(top) or not os.path.lexists(src):
            problem = f"{what} is missing"
        elif not _inside(src, top):
            problem = f"{what} leads out of its task's work directory"
        dest = os.path.realpath(os.path.join(work, str(inp["dest"])))
        if problem is None and (not _inside(dest, work) or dest == work):
            problem = f"{what}: its destination {inp['dest']!r} leaves the work directory"
        if problem is None:
            try:
                if inp.get("into"):
                    os.makedirs(dest, exist_ok=True)
                    if not os.path.isdir(src):
                        dest = os.path.join(dest, os.path.basename(src))
                else:
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                if os.path.isdir(src):
                    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
                else:
                    shutil.copy2(src, dest, follow_symlinks=False)
            except (OSError, shutil.Error) as exc:
                problem = f"{what} could not be copied: {exc}"
        if problem is not None:
            with open("output.log", "a") as log:
                log.write(f"tacc: {problem}; the task did not run\n")
            raise Refused(problem)


def _as_user(spec: dict[str, Any], task_fd: int, archive_fd: int | None) -> None:
    """In the user's child: clean the directory (keeping the log and checkpoints) and lay it out."""
    env = {str(k): str(v) for k, v in spec["env"].items()}
    os.environ.clear()
    os.environ.update(env)
    os.umask(0o027)
    os.fchdir(task_fd)
    keep = set(spec.get("keep", ()))
    for name in os.listdir("."):
        if name not in keep or (name == "output.log" and os.path.islink(name)):
            _rm(name)
    if not os.path.isdir("checkpoint") or os.path.islink("checkpoint"):
        if os.path.lexists("checkpoint"):
            _rm("checkpoint")
        os.mkdir("checkpoint", 0o750)
    _code(spec["code"], archive_fd, env)
    workdir = str(spec.get("workdir") or ".")
    os.makedirs(os.path.join("work", workdir), exist_ok=True)
    for name, content in spec.get("files", {}).items():
        if "/" in name or name in ("", ".", "..", "output.log", "checkpoint", "work"):
            raise Refused(f"bad plan file name {name!r}")
        with open(name, "w") as fh:
            fh.write(content)
    fd = os.open("output.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o640)
    os.close(fd)
    if spec.get("inputs"):
        _copy_inputs(list(spec["inputs"]))
    env_plan = spec.get("env_plan")
    if env_plan and env_plan.get("kind") != "base" and spec.get("build_env", True):
        _build_env(env_plan)


def prepare(spec: dict[str, Any], account: dict[str, Any] | None, ctl: int, uid: int, gid: int) -> int:
    """Create and fill the task's directory; returns its fd. Raises Refused with the reason."""
    group = gid if (account is not None and uid != 0) else None  # an unprivileged service reads logs by group
    # setgid: what the task creates inside belongs to that group too, so the service can read its log and outputs
    task_fd = owned_dir(str(spec["task_dir"]), account, 0o2750 if group is not None else 0o700, group)
    for key in ("user_dir", "env_dir"):
        if spec.get(key) and not os.path.isdir(spec[key]):
            os.close(owned_dir(str(spec[key]), account, 0o700))
    # Imported here, as root: the user may not be able to read this interpreter's library.
    import gzip  # noqa: F401  (tarfile imports it lazily)

    import tacc_hub.snapshot
    if spec.get("env_plan", {}).get("kind", "base") != "base":
        import site

        site.main()  # building an env needs the installed packages (the launcher may start without site)
        import tacc_hub.executors.prepare  # noqa: F401
    archive_fd = None
    if spec["code"]["kind"] == "snapshot":
        with as_caller(uid, gid):
            archive_fd = os.open(str(spec["code"]["archive"]), os.O_RDONLY | os.O_NOFOLLOW)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the user's child
        os.close(read_end)
        try:
            os.close(ctl)
            drop_to(account)
            _as_user(spec, task_fd, archive_fd)
            os._exit(0)
        except BaseException as exc:  # reported to the parent, then exit
            msg = str(exc) if isinstance(exc, Refused) else f"{type(exc).__name__}: {exc}"
            with os.fdopen(write_end, "w") as fh:
                fh.write(msg[-4000:])
            os._exit(1)
    os.close(write_end)
    if archive_fd is not None:
        os.close(archive_fd)
    with os.fdopen(read_end) as fh:
        message = fh.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        os.close(task_fd)
        raise Refused(f"preparing the task failed: {message.strip() or 'exit status ' + str(status)}")
    sys.stdout.flush()
    return task_fd
