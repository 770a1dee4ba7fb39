"""Extract an untrusted tar archive without writing outside its destination, on any Python 3.11.

``TarFile.extractall(filter="data")`` arrived in 3.11.4; Debian 12's Python is 3.11.2. So
``safe_extractall`` first refuses what no code archive needs (absolute names, ``..``, devices,
fifos, links out of the tree), then uses the ``data`` filter where tarfile has it, and otherwise
extracts member by member with the same checks done here: every path written is resolved
(following the links extracted so far) and must stay inside ``dest``; modes lose setuid, setgid,
sticky and group/other write bits; owners are not restored.
"""

from __future__ import annotations

import copy
import os
import tarfile
from pathlib import Path


class UnsafeArchiveError(tarfile.TarError):
    """A member would write outside the destination, or is not a plain file, directory or link."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _check_name(member: tarfile.TarInfo) -> None:
    name = member.name
    if not name or name.startswith(("/", "\\")) or os.path.isabs(name):
        raise UnsafeArchiveError(f"archive member {name!r} has an absolute path")
    if ".." in Path(name).parts or ".." in name.split("/"):
        raise UnsafeArchiveError(f"archive member {name!r} leaves the tree (..)")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeArchiveError(f"archive member {name!r} is a device, fifo or other special file")
    if member.issym() or member.islnk():
        link = member.linkname
        if not link or os.path.isabs(link) or link.startswith(("/", "\\")):
            raise UnsafeArchiveError(f"archive member {name!r} links to an absolute path {link!r}")


def _resolved(root: str, rel: str) -> str:
    return os.path.realpath(os.path.join(root, rel))


def _sanitized(member: tarfile.TarInfo, root: str) -> tarfile.TarInfo:
    """The checks of tarfile's ``data`` filter, against the tree as extracted so far."""
    target = _resolved(root, member.name)
    if not _inside(target, root):
        raise UnsafeArchiveError(f"archive member {member.name!r} would be written outside {root}")
    if member.issym():
        dest = _resolved(root, os.path.join(os.path.dirname(member.name), member.linkname))
        if not _inside(dest, root):
            raise UnsafeArchiveError(f"archive member {member.name!r} links outside the tree")
    if member.islnk():
        if not _inside(_resolved(root, member.linkname), root):
            raise UnsafeArchiveError(f"archive member {member.name!r} hard-links outside the tree")
    out = copy.copy(member)
    if member.isdir():
        out.mode = 0o755
    elif member.isreg() or member.islnk():
        mode = (member.mode & 0o755) | 0o600  # owner rw; no setuid/setgid/sticky, no group/other write
        if not mode & 0o100:
            mode &= ~0o011
        out.mode = mode
    out.uid, out.gid = os.geteuid(), os.getegid()
    out.uname = out.gname = ""
    return out


def safe_extractall(tar: tarfile.TarFile, dest: str | Path) -> None:
    """Extract every member of ``tar`` under ``dest``; raise ``tarfile.TarError`` on a hostile one."""
    root = os.path.realpath(dest)
    os.makedirs(root, exist_ok=True)
    members = tar.getmembers()
    for member in members:
        _check_name(member)
    try:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(root, members=members, filter="data")
        else:
            for member in members:
                tar.extract(_sanitized(member, root), root, set_attrs=not member.issym())
    finally:
        # A later link can change where an earlier one points (both paths check each link only when
        # it is made): no link may be left pointing out of the tree, whether extraction failed or not.
        escaped = [m.name for m in members if m.issym() and os.path.islink(os.path.join(root, m.name))
                   and not _inside(_resolved(root, m.name), root)]
        for name in escaped:
            os.unlink(os.path.join(root, name))
    if escaped:
        raise UnsafeArchiveError(f"archive member {escaped[0]!r} links outside the tree")
