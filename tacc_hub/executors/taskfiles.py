"""Read files in a task's directory without trusting anything the task can write.

A task directory (``<data_dir>/tasks/<id>``) belongs to the task's Unix account: the task can
replace any file in it with a symbolic link, a hard link, a FIFO or a directory, at any moment.
The service reads logs and outputs there with more privilege than the task (as root, or as the
service account that holds the database), so it never resolves a path the task controls:

- It starts from a directory it trusts: the parent of the task directory (the executor's
  ``tasks/``, which the task cannot write: it must be owned by root or the service and writable
  by no group or other user), opens the task directory from it with
  ``O_DIRECTORY | O_NOFOLLOW`` and checks that the task's account owns it.
- Each further component is opened with ``openat`` (``dir_fd``) and ``O_NOFOLLOW``, directories
  with ``O_DIRECTORY``; nothing is ever looked up by a full path, so a link swapped in between
  two steps is never followed (the kernel refuses it: ``ELOOP``/``ENOTDIR``).
- Every component is checked twice: ``lstat`` through the parent's fd before it is opened (so a
  FIFO, a device or a socket is never even opened), then ``fstat`` of the opened fd, which must
  be the same inode (``st_dev``/``st_ino``). The last component must be a regular file, opened
  with ``O_NONBLOCK | O_NOCTTY``: a FIFO swapped in between the two checks cannot block the
  service, a terminal cannot become its controlling one.
- Every component must be owned by the expected uid (the task's account; the service's own uid
  in ``service`` identity) and lie on the same file system as the task directory (no mount point
  is crossed, so a FUSE file system the user mounted there cannot hang a read).

Hard links: a hard link in the task directory to a file the task cannot read (``/etc/shadow``,
the munge key, another user's checkpoint) is the same inode as that file, so its ``st_uid`` is
that file's owner (root, or the other user), not the task's: the uid check refuses it. A file
with several links that the task's account does own is read: its owner can read it anyway
(``fs.protected_hardlinks`` also stops an unprivileged user from linking files they do not own).
In ``service`` identity the expected uid is the service's own: a task then runs as the service
and can read what the service can, so these checks stop links to other accounts' files only.

Files a root supervisor writes (exit code, supervisor state) are not in the task directory but
in the service's state directory, so everything read from a task directory must be the task's.

This module uses the standard library only (a root helper may import it).
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
MAX_DEPTH = 128  # directory levels below an output that the archive walker descends


class TaskFileError(Exception):
    """A file in a task directory the service refuses to read; ``str()`` is safe to show its owner."""

    def __init__(self, rel: str, why: str) -> None:
        self.rel = rel
        self.why = why
        super().__init__(f"{_show(rel)} {why}" if rel else why)


class TaskFileMissing(TaskFileError):
    """The file (or the task directory) does not exist, or is not ready yet: read as empty."""


class _Identity(Protocol):
    def account(self, user: str) -> Any: ...


def expected_uid(identity: _Identity, owner: str, *, service_user: str | None = None) -> int:
    """The uid that must own ``owner``'s task files: their account's; in service identity the service's
    own, or ``service_user``'s when tasks run as one site-wide account (the Slurm executor's ``submit_as``).

    Raises what ``identity.account`` raises (``IdentityError``: the account is gone), and
    ``TaskFileError`` when ``service_user`` is no account here.
    """
    account = identity.account(owner)
    if account is not None:
        return int(account.uid)
    if service_user:
        import pwd

        try:
            return pwd.getpwnam(service_user).pw_uid
        except KeyError:
            raise TaskFileError("", f"no Unix account {_show(service_user)!r} that the tasks run as") from None
    return os.geteuid()


def executor_uid(executor: Any, owner: str) -> int:
    """``expected_uid`` for ``owner``'s tasks on ``executor`` (its ``identity``, and its ``submit_as`` if any)."""
    return expected_uid(executor.identity, owner, service_user=getattr(executor, "submit_as", None))


def _show(rel: str) -> str:
    """A task-chosen name, printable (no terminal escapes) and bounded."""
    text = "".join(c if c.isprintable() else "?" for c in rel[:200])
    return text + ("..." if len(rel) > 200 else "")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def _components(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if rel.startswith("/") or "\x00" in rel or ".." in parts:
        raise TaskFileError(rel, "is not a path inside the task directory")
    return parts


def _owner_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def _check(st: os.stat_result, rel: str, uid: int, dev: int, *, want_dir: bool) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise TaskFileError(rel, "is a symbolic link: the service does not follow links in a task directory "
                                 "(the task replaced it)")
    if want_dir and not stat.S_ISDIR(st.st_mode):
        raise TaskFileError(rel, f"is {_kind(st.st_mode)}, not a directory")
    if not want_dir and not stat.S_ISREG(st.st_mode):
        raise TaskFileError(rel, f"is {_kind(st.st_mode)}, not a regular file: the service reads regular files only")
    if st.st_uid != uid:
        raise TaskFileError(rel, f"is owned by {_owner_name(st.st_uid)}, not by the task's account "
                                 f"{_owner_name(uid)}: not read (a hard link to a file the task cannot read?)")
    if st.st_dev != dev:
        raise TaskFileError(rel, "is on another file system (a mount point in the task directory): not read")


def _open_at(dfd: int, name: str, rel: str, uid: int, dev: int, *, want_dir: bool) -> int:
    """Open ``name`` in the directory ``dfd`` without following a link; checked before and after opening."""
    try:
        before = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        raise TaskFileMissing(rel, "does not exist") from None
    except NotADirectoryError:
        raise TaskFileError(rel, "has a component that is not a directory") from None
    except PermissionError:
        raise TaskFileError(rel, "cannot be read by the service (permission denied)") from None
    _check(before, rel, uid, dev, want_dir=want_dir)
    try:
        fd = os.open(name, _DIR_FLAGS if want_dir else _FILE_FLAGS, dir_fd=dfd)
    except FileNotFoundError:
        raise TaskFileMissing(rel, "does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise TaskFileError(rel, "was replaced while being opened (a link?): not read") from None
        raise TaskFileError(rel, f"cannot be opened ({os.strerror(exc.errno or 0)})") from None
    try:
        after = os.fstat(fd)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise TaskFileError(rel, "was replaced while being opened: not read")
        _check(after, rel, uid, dev, want_dir=want_dir)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_task_dir(task_dir: str | Path, uid: int) -> int:
    """An fd on ``task_dir``, opened from its (trusted) parent with O_NOFOLLOW; its owner must be ``uid``.

    Raises ``TaskFileMissing`` when it does not exist yet, or is still owned by root or the service
    (the launcher has not handed it to the task's account yet); ``TaskFileError`` otherwise.
    """
    task_dir = Path(task_dir)
    try:
        parent = os.open(task_dir.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TaskFileMissing("", "the task directory does not exist yet") from None
    except OSError as exc:
        raise TaskFileError("", f"the directory of task directories cannot be opened ({os.strerror(exc.errno or 0)})"
                            ) from None
    try:
        pst = os.fstat(parent)
        if pst.st_uid not in (0, os.geteuid()) or pst.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise TaskFileError("", "the directory holding the task directories is writable by other accounts "
                                    "(it must be owned by root or the service, mode 0711 or 0755): not read")
        name = task_dir.name
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            raise TaskFileMissing("", "the task directory does not exist yet") from None
        if stat.S_ISDIR(st.st_mode) and st.st_uid != uid and st.st_uid in (0, os.geteuid()):
            raise TaskFileMissing("", "the task directory is still being prepared")
        try:
            return _open_at(parent, name, "", uid, pst.st_dev, want_dir=True)
        except TaskFileError as exc:
            if isinstance(exc, TaskFileMissing):
                raise
            raise TaskFileError("", f"the task directory {exc.why}") from None
    finally:
        os.close(parent)


@contextmanager
def _walk_to(task_dir: str | Path, parts: list[str], rel: str, uid: int) -> Iterator[tuple[int, int]]:
    """(fd of the directory holding ``parts[-1]``, the task directory's st_dev); the fd is closed on exit."""
    fd = open_task_dir(task_dir, uid)
    dev = os.fstat(fd).st_dev
    try:
        for i, name in enumerate(parts[:-1]):
            nxt = _open_at(fd, name, "/".join(parts[: i + 1]), uid, dev, want_dir=True)
            os.close(fd)
            fd = nxt
        yield fd, dev
    finally:
        os.close(fd)


def open_task_file(task_dir: str | Path, rel: str, uid: int) -> BinaryIO:
    """Open the regular file ``rel`` (relative to ``task_dir``) for reading; see the module docstring.

    Raises ``TaskFileMissing`` (absent: callers read it as empty) or ``TaskFileError`` (refused).
    """
    parts = _components(rel)
    if not parts:
        raise TaskFileError(rel, "is not a file name")
    with _walk_to(task_dir, parts, rel, uid) as (dfd, dev):
        fd = _open_at(dfd, parts[-1], "/".join(parts), uid, dev, want_dir=False)
    return os.fdopen(fd, "rb")


def read_chunk(task_dir: str | Path, rel: str, uid: int, offset: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``rel`` from ``offset``; b"" when it does not exist. ``TaskFileError`` if refused."""
    try:
        fh = open_task_file(task_dir, rel, uid)
    except TaskFileMissing:
        return b""
    with fh:
        out = bytearray()
        fd = fh.fileno()
        if offset >= os.fstat(fd).st_size:
            return b""  # past the end (pread would fail with EINVAL beyond the file system's largest file)
        while len(out) < limit:
            got = os.pread(fd, limit - len(out), offset + len(out))
            if not got:
                break
            out += got
        return bytes(out)


class _Exactly:
    """``size`` bytes of ``fh``: zeros if it shrank since it was measured, cut if it grew (a running task)."""

    def __init__(self, fh: IO[bytes], size: int) -> None:
        self.fh, self.left = fh, size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.fh.read(n) if n else b""
        data += b"\0" * (n - len(data))
        self.left -= len(data)
        return data


def _tarinfo(arcname: str, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(arcname)
    info.mtime = int(st.st_mtime)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if stat.S_ISDIR(st.st_mode):
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    else:
        info.type, info.size = tarfile.REGTYPE, st.st_size
        info.mode = 0o755 if st.st_mode & 0o100 else 0o644
    return info


def add_task_tree(tar: tarfile.TarFile, task_dir: str | Path, rel: str, arcname: str, uid: int) -> list[str]:
    """Add ``rel`` (a file or a directory, recursively) from ``task_dir`` to ``tar`` as ``arcname``.

    Only regular files and directories owned by ``uid`` go in, opened as ``open_task_file`` does
    (never through a link, never across a mount point, never outside ``task_dir``). Returns what
    was left out, one "arcname: why" line each; an absent ``rel`` adds nothing and is not listed.
    """
    skipped: list[str] = []
    try:
        parts = _components(rel)
    except TaskFileError as exc:
        return [f"{_show(arcname)}: {exc.why}"]
    try:
        with _walk_to(task_dir, parts, rel, uid) as (dfd, dev):
            if not parts:  # the task directory itself
                _add_dir(tar, os.dup(dfd), arcname, uid, dev, skipped, 0)
                return skipped
            name = parts[-1]
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            fd = _open_at(dfd, name, rel, uid, dev, want_dir=stat.S_ISDIR(st.st_mode))
    except (FileNotFoundError, TaskFileMissing):
        return skipped
    except TaskFileError as exc:
        return [f"{_show(arcname)}: {exc.why}"]
    except OSError as exc:
        return [f"{_show(arcname)}: cannot be read ({os.strerror(exc.errno or 0)})"]
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        _add_dir(tar, fd, arcname, uid, dev, skipped, 0)
    else:
        _add_file(tar, fd, arcname)
    return skipped


def _add_file(tar: tarfile.TarFile, fd: int, arcname: str) -> None:
    with os.fdopen(fd, "rb") as fh:
        info = _tarinfo(arcname, os.fstat(fd))
        tar.addfile(info, _Exactly(fh, info.size))


def _add_dir(tar: tarfile.TarFile, fd: int, arcname: str, uid: int, dev: int, skipped: list[str], depth: int) -> None:
    """Add the directory open as ``fd`` (closed here) and what is in it, recursively."""
    try:
        tar.addfile(_tarinfo(arcname, os.fstat(fd)))
        if depth >= MAX_DEPTH:
            skipped.append(f"{_show(arcname)}: deeper than {MAX_DEPTH} directories; its contents are left out")
            return
        try:
            names = sorted(os.listdir(fd))
        except OSError as exc:
            skipped.append(f"{_show(arcname)}: cannot be listed ({os.strerror(exc.errno or 0)})")
            return
        for name in names:
            child = posixpath.join(arcname, name)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                is_dir = stat.S_ISDIR(st.st_mode)
                cfd = _open_at(fd, name, name, uid, dev, want_dir=is_dir)
            except TaskFileMissing:
                continue  # removed while we walked
            except FileNotFoundError:
                continue
            except OSError as exc:
                skipped.append(f"{_show(child)}: cannot be read ({os.strerror(exc.errno or 0)})")
                continue
            except TaskFileError as exc:
                skipped.append(f"{_show(child)}: {exc.why}")
                continue
            if is_dir:
                _add_dir(tar, cfd, child, uid, dev, skipped, depth + 1)
            else:
                _add_file(tar, cfd, child)
    finally:
        os.close(fd)
