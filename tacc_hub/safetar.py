"""Extract an untrusted tar archive without writing outside its destination, on any Python 3.11.

``TarFile.extractall(filter="data")`` arrived in 3.11.4; Debian 12's Python is 3.11.2. So
``safe_extractall`` first refuses what no code archive needs (absolute names, ``..``, devices,
fifos, links out of the tree), then uses the ``data`` filter where tarfile has it, and otherwise
extracts member by member with the same checks done here: every path written is resolved
(following the links extracted so far) and must stay inside ``dest``; modes lose setuid, setgid,
sticky and group/other write bits; owners are not restored.

``ArchiveLimits`` (re-exported by ``snapshot``, which checks uploads with it) lives here because
``safe_extractall`` applies the same caps while extracting: members, unpacked bytes, path depth
and name length are counted header by header, so a hostile archive stops at the member that
crosses a cap instead of filling the disk.
"""

from __future__ import annotations

import copy
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

_MiB = 1024 * 1024
MAX_SNAPSHOT_BYTES = 256 * _MiB
NAME_MAX = 255  # bytes in one path component (Linux)


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps on what one code archive may hold; the defaults fit real code repositories with room to spare.

    The Linux kernel, a large repository, is ~80k files and ~1.3 GB unpacked, ~220 MB as tar.gz
    (about 6:1); research repos with vendored code are far smaller. So: 256 MiB compressed (the
    upload cap), 4 GiB unpacked (3x the kernel), 100k members (the kernel fits), 64 path
    components and 4096-byte names (PATH_MAX), and an unpacked/compressed ratio of at most 200
    (source compresses 3-10x; a gzip bomb of zeros is ~1000x) checked only above 64 MiB unpacked,
    so a small archive of very repetitive files is never refused for compressing well.
    """

    max_bytes: int = MAX_SNAPSHOT_BYTES
    max_unpacked_bytes: int = 4 * 1024 * _MiB
    max_members: int = 100_000
    max_depth: int = 64
    max_name_bytes: int = 4096
    max_ratio: int = 200
    ratio_floor_bytes: int = 64 * _MiB


DEFAULT_LIMITS = ArchiveLimits()


def human_bytes(n: int) -> str:
    """``4 GiB``, ``256 MiB``, ``1.5 KiB``: for messages."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            text = f"{n / size:.1f}".removesuffix(".0")
            return f"{text} {unit}"
    return f"{n} bytes"


class UnsafeArchiveError(tarfile.TarError):
    """A member would write outside the destination, or is not a plain file, directory or link."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _check_name(member: tarfile.TarInfo, limits: ArchiveLimits) -> None:
    name = member.name
    if len(os.fsencode(name)) > limits.max_name_bytes:
        raise UnsafeArchiveError(f"archive member {name[:200]!r}... has a name longer than "
                                 f"{limits.max_name_bytes} bytes")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if len(parts) > limits.max_depth:
        raise UnsafeArchiveError(f"archive member {name!r} is more than {limits.max_depth} directories deep")
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


def _bounded_members(tar: tarfile.TarFile, limits: ArchiveLimits) -> list[tarfile.TarInfo]:
    """The members, read header by header and checked, stopping at the first that crosses a cap."""
    members: list[tarfile.TarInfo] = []
    unpacked = 0
    for member in tar:  # lazily: headers are read (and data skipped) one member at a time
        if len(members) >= limits.max_members:
            raise UnsafeArchiveError(f"archive has more than {limits.max_members} members "
                                     f"(limit reached at {member.name!r})")
        _check_name(member, limits)
        if member.isreg():
            if member.size < 0:
                raise UnsafeArchiveError(f"archive member {member.name!r} has a negative size")
            unpacked += member.size
            if unpacked > limits.max_unpacked_bytes:
                raise UnsafeArchiveError(
                    f"archive unpacks to more than {human_bytes(limits.max_unpacked_bytes)} "
                    f"(limit {limits.max_unpacked_bytes} bytes, crossed at member {member.name!r})")
        members.append(member)
    return members


def safe_extractall(tar: tarfile.TarFile, dest: str | Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> None:
    """Extract every member of ``tar`` under ``dest``; raise ``tarfile.TarError`` on a hostile one.

    Every header is checked (and counted against ``limits``) before anything is written, so an
    archive over a cap extracts nothing. Hard links inside the tree are allowed here (task
    outputs may hold them); code snapshots are refused them earlier, by ``snapshot.check_archive``.
    """
    root = os.path.realpath(dest)
    os.makedirs(root, exist_ok=True)
    members = _bounded_members(tar, limits)
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
