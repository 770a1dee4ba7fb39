"""The Slurm executor's task files: a task dir owned by the task's account, and reading what its job writes.

``prepare_owned``: the task dir ``<root>/tasks/<id>`` is laid out by the service in a stage dir
of its own (``<root>/tasks/.stage-<id>``, root's, mode 0700: no other user can enter it while it
is filled), every entry of it then handed to the account with ``lchown`` (never through a link:
the user's code may hold symlinks), the stage made the account's (mode 0700) and renamed into
place. The ``output.log`` and ``checkpoint/`` of an earlier run (a rerun after preemption) are
renamed from the old dir into the stage as they are (a rename follows no link and changes no
owner: whatever the job left there stays the account's own); the old dir is then removed with
``shutil.rmtree`` (file-descriptor based: it follows no link). ``<root>/tasks`` and
``<root>/users`` are the service's, mode 0711: an account reaches its own dirs, lists no others.
This is the one place the lead's ``tacc-launcher prepare`` replaces.

``read_job_file``: the files the job writes as its user (``job``, ``exitcode``) are read with
``O_NOFOLLOW | O_NONBLOCK`` (a link or a FIFO planted there is never followed or waited on),
only when they are regular files owned by the job's uid (a hard link to another's file is
refused), at most ``limit`` bytes.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("tacc_hub.executors.slurm")

KEPT = ("output.log", "checkpoint")  # a rerun keeps the earlier run's log and checkpoints
SMALL = 64  # bytes: a job id or an exit code


def shared_dir(path: Path) -> None:
    """``path`` (and its parents) as a directory of the service's: every account may pass, none may list it."""
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchmod(fd, 0o711)
    finally:
        os.close(fd)


def owned_dir(path: Path, uid: int, gid: int, mode: int = 0o700) -> None:
    """Create ``path`` owned by ``uid`` (or take an existing directory over). Its parent must be the
    service's (the account cannot swap ``path`` under us); never follows a link."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    """lchown every entry under ``top`` (not ``top`` itself); ``os.walk`` does not descend into links."""
    for dirpath, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            os.lchown(os.path.join(dirpath, name), uid, gid)


def prepare_owned(tdir: Path, uid: int | None, gid: int | None, fill: Callable[[Path], None]) -> None:
    """Lay out ``tdir`` through a stage (see the module docstring). ``fill(stage)`` writes the run's files;
    ``uid`` None: the files stay the service's (jobs run as the service's account)."""
    parent = tdir.parent
    stage = parent / f".stage-{tdir.name}"
    _remove(stage)
    os.mkdir(stage, 0o700)
    try:
        fill(stage)
        if uid is not None and gid is not None:
            _chown_tree(stage, uid, gid)
        if os.path.isdir(tdir) and not os.path.islink(tdir):
            for name in KEPT:
                try:
                    os.lstat(tdir / name)
                except FileNotFoundError:
                    continue
                try:  # over the fresh (empty) one; a dir over a file or the reverse: the fresh one stays
                    os.replace(tdir / name, stage / name)
                except OSError as exc:
                    log.warning("slurm: %s of %s not kept: %s", name, tdir, exc)
        if uid is not None and gid is not None:
            owned_dir(stage, uid, gid)
        else:
            os.chmod(stage, 0o700)
    except BaseException:
        _remove(stage)
        raise
    old = None
    if os.path.lexists(tdir):
        old = parent / f".old-{tdir.name}-{time.monotonic_ns()}"
        os.rename(tdir, old)
    os.rename(stage, tdir)
    if old is not None:
        _remove(old)


def read_job_file(path: str, uid: int, limit: int = SMALL) -> str | None:
    """The text of a file the job wrote, or None when it is absent or not to be trusted (see the docstring)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # ELOOP: a symlink; EACCES...
        log.warning("slurm: not reading %s: %s", path, exc)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
            log.warning("slurm: not reading %s: %s owned by uid %d (expected a regular file of uid %d)", path,
                        "a regular file" if stat.S_ISREG(st.st_mode) else "not a regular file", st.st_uid, uid)
            return None
        return os.read(fd, limit).decode(errors="replace")
    finally:
        os.close(fd)

