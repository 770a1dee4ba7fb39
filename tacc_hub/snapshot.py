"""Code snapshots: deterministic archives of a directory, and their safe extraction.

Invariants:
- ``pack`` is deterministic: the same tree gives the same bytes (sorted
  entries, zero mtimes/uids, normalized modes, gzip without a timestamp), so
  the sha256 of the archive is the code's identity in the task digest.
- ``unpack`` never writes outside its destination (``safetar.safe_extractall``: tarfile's
  ``data`` filter where it exists, the same checks on Python < 3.11.4: no absolute paths,
  no ``..``, no links leaving the tree, no devices).
- Symlinks inside the tree are kept only if they point inside it.
- ``unpack_verified`` extracts nothing unless the archive's bytes hash to the sha256 the task
  names: it copies the archive (hashing as it reads) into a private temporary file first, and
  extracts that copy, so what is checked is what is extracted.
- The code store (``CodeStore``) is private to the service: its directory is 0700, its archives
  0600, whatever the umask.
- An archive is stored, and extracted, only if ``check_archive`` accepts it: streamed through
  a bounded gzip reader and tarfile's stream mode, it is refused at the first member that
  crosses a cap (``ArchiveLimits``: compressed and unpacked bytes, members, depth, name length,
  compression ratio) or that no code archive needs (hard links, devices, FIFOs, links out of the
  tree, paths through links, duplicates). Memory and time stay bounded for any input.

Standard library only: the root launcher imports this module (and ``safetar``).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import hmac
import io
import os
import re
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tacc_hub.safetar import DEFAULT_LIMITS, MAX_SNAPSHOT_BYTES, NAME_MAX, ArchiveLimits, human_bytes, safe_extractall

__all__ = [
    "DEFAULT_EXCLUDES", "DEFAULT_LIMITS", "MAX_SNAPSHOT_BYTES", "ArchiveLimits", "ArchiveRefused", "ArchiveSummary",
    "CodeStore", "SnapshotError", "check_archive", "digest_of", "pack", "unpack", "unpack_verified",
]

DEFAULT_EXCLUDES = frozenset({
    ".git", "__pycache__", ".ipynb_checkpoints", ".venv", "venv", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", "node_modules", ".tox", ".DS_Store",
})
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_SPOOL_BYTES = 32 * 1024 * 1024  # archives up to this size are checked in memory, larger ones in a temporary file


class SnapshotError(ValueError):
    pass


class ArchiveRefused(SnapshotError):
    """A well-formed archive that breaks a rule; ``member`` names the member at fault (None: the whole archive)."""

    def __init__(self, member: str | None, message: str) -> None:
        super().__init__(message)
        self.member = member


@dataclass(frozen=True)
class ArchiveSummary:
    members: int
    unpacked_bytes: int


_IN_CHUNK = 64 * 1024  # compressed bytes read at a time
_TAR_BUFSIZE = 16 * 1024  # tarfile's stream reads (and read-ahead)
_HEADER_SLACK = 256 * 1024  # decompressed bytes allowed between one member's data and the next member
_TRAILER_BYTES = 1024 * 1024  # decompressed bytes allowed after the tar's end-of-archive block
_MAX_LINK_HOPS = 40  # as the kernel's ELOOP
_LINK_STEPS = 256  # path components one symlink may take to resolve
_KIND = {tarfile.LNKTYPE: "a hard link", tarfile.CHRTYPE: "a character device", tarfile.BLKTYPE: "a block device",
         tarfile.FIFOTYPE: "a FIFO", tarfile.GNUTYPE_SPARSE: "a sparse file"}
_RULE = "code archives hold files, directories and symbolic links inside the tree"


def _block(size: int) -> int:
    return -(-max(size, 0) // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE


class _Inflater:
    """A gzip decoder for tarfile's stream mode that counts every byte and refuses at the first cap crossed.

    ``budget`` is the decompressed offset the stream may not pass now; ``check_archive`` moves it
    at each member (its data plus ``_HEADER_SLACK``), so no header tarfile reads into memory (PAX,
    GNU long names, sparse maps) can grow past a few hundred KiB, whatever it claims.
    """

    def __init__(self, read: Callable[[int], bytes], size: int | None, limits: ArchiveLimits) -> None:
        self._src_read = read
        self._size = size
        self._limits = limits
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip only, header and CRC/length trailer checked
        self._tail = b""
        self.compressed = 0
        self.out = 0
        self.eof = False
        self._magic = False
        self.budget = _HEADER_SLACK
        self.over_budget: tuple[str | None, str] = (None, "the archive's first headers are larger than 256 KiB")
        # bytes the tar stream may carry beyond its files' contents: headers, padding, names
        self._stream_cap = limits.max_unpacked_bytes + limits.max_members * (3 * 1024 + 2 * limits.max_name_bytes) \
            + _TRAILER_BYTES + _HEADER_SLACK

    def _src(self, n: int) -> bytes:
        data = self._src_read(n)
        if not isinstance(data, bytes | bytearray):
            raise SnapshotError("the archive is not a binary file")
        if self.compressed == 0:
            self._magic = data[:2] == b"\x1f\x8b"
        self.compressed += len(data)
        if self.compressed > self._limits.max_bytes:
            raise ArchiveRefused(None, f"archive is larger than {human_bytes(self._limits.max_bytes)} "
                                       f"(limit {self._limits.max_bytes} bytes)")
        return bytes(data)

    def read(self, n: int = -1) -> bytes:
        n = _IN_CHUNK if n is None or n <= 0 else n
        while not self.eof:
            data = self._tail or self._src(_IN_CHUNK)
            if not data:
                if self.compressed == 0:
                    raise SnapshotError("not a tar.gz archive: the file is empty")
                raise SnapshotError("not a tar.gz archive: the gzip stream is truncated")
            try:
                out = self._z.decompress(data, n)
            except zlib.error as exc:
                if self.out == 0 and not (self.compressed >= 2 and self._magic):
                    raise SnapshotError(f"not a tar.gz archive: not gzip data ({exc})") from None
                raise SnapshotError(f"not a tar.gz archive: corrupt gzip data ({exc})") from None
            self._tail = self._z.unconsumed_tail
            if self._z.eof:
                self.eof = True
                if self._z.unused_data or self._src(1):
                    raise ArchiveRefused(None, "archive has data after the end of its gzip stream")
            if out:
                self._count(len(out))
                return out
        return b""

    def _count(self, n: int) -> None:
        self.out += n
        lim = self._limits
        if self.out > self.budget:
            raise ArchiveRefused(*self.over_budget)
        if self.out > self._stream_cap:
            raise ArchiveRefused(None, f"archive unpacks to more than {human_bytes(lim.max_unpacked_bytes)} "
                                       f"(limit {lim.max_unpacked_bytes} bytes)")
        # the whole size when known (an archive may hold a very repetitive stretch); else what was read so far
        compressed = self._size if self._size is not None else self.compressed
        if self.out > lim.ratio_floor_bytes and self.out > lim.max_ratio * max(compressed, 1):
            raise ArchiveRefused(None, _ratio_message(self.out, compressed, lim))


def _ratio_message(unpacked: int, compressed: int, lim: ArchiveLimits) -> str:
    return (f"archive unpacks to more than {lim.max_ratio} times its compressed size ({human_bytes(unpacked)} from "
            f"{human_bytes(compressed)}; limit {lim.max_ratio}x above {human_bytes(lim.ratio_floor_bytes)}): "
            f"a compression bomb, or data that does not belong in a code snapshot")


def _refuse(name: str, rule: str) -> ArchiveRefused:
    shown = name if len(name) <= 300 else name[:300] + "..."
    return ArchiveRefused(name, f"archive member {shown!r} {rule}")


# The tree of names seen so far: a directory is a dict (its entry "" is "d" if the archive names it,
# None if only implied by a deeper member), a file is "f", a symlink is the 1-tuple (its target,).
_Node = dict[str, Any]


class _Checker:
    def __init__(self, limits: ArchiveLimits, size: int | None) -> None:
        self.limits = limits
        self.size = size
        self.members = 0
        self.unpacked = 0
        self.last: str | None = None
        self.root: _Node = {"": "d"}
        self.links: list[tuple[str, list[_Node], str]] = []

    def _name_parts(self, name: str, what: str) -> list[str]:
        lim = self.limits
        if "\x00" in name:
            raise _refuse(name, f"has a NUL byte in its {what}")
        if 4 * len(name) > lim.max_name_bytes and len(os.fsencode(name)) > lim.max_name_bytes:  # <= 4 bytes a char
            raise _refuse(name, f"has a {what} longer than {lim.max_name_bytes} bytes")
        parts = name.split("/")
        if ".." in parts:
            raise _refuse(name, f"leaves the tree (.. in its {what})")
        comps = [p for p in parts if p not in ("", ".")]
        if len(comps) > lim.max_depth:
            raise _refuse(name, f"has a {what} more than {lim.max_depth} directories deep")
        for c in comps:
            if 4 * len(c) > NAME_MAX and len(os.fsencode(c)) > NAME_MAX:
                raise _refuse(name, f"has a {what} component longer than {NAME_MAX} bytes")
        return comps

    def member(self, info: tarfile.TarInfo) -> None:
        lim = self.limits
        name = info.name
        self.last = name
        self.members += 1
        if self.members > lim.max_members:
            raise ArchiveRefused(name, f"archive has more than {lim.max_members} members "
                                       f"(limit reached at member {name[:300]!r})")
        if not name:
            raise ArchiveRefused(name, "archive has a member with an empty name")
        if name.startswith(("/", "\\")) or os.path.isabs(name):
            raise _refuse(name, "has an absolute path; " + _RULE)
        if info.sparse is not None:
            raise _refuse(name, "is a sparse file; " + _RULE)
        if not (info.isreg() or info.isdir() or info.issym()):
            kind = _KIND.get(info.type, f"of type {info.type!r}")
            raise _refuse(name, f"is {kind}; {_RULE}")
        comps = self._name_parts(name, "path")
        if info.isreg():
            if info.size < 0:
                raise _refuse(name, "has a negative size")
            self.unpacked += info.size
            if self.unpacked > lim.max_unpacked_bytes:
                raise ArchiveRefused(name, f"archive unpacks to more than {human_bytes(lim.max_unpacked_bytes)} "
                                           f"(limit {lim.max_unpacked_bytes} bytes, crossed at member {name[:300]!r})")
            if self.size is not None and self.unpacked > lim.ratio_floor_bytes \
                    and self.unpacked > lim.max_ratio * max(self.size, 1):
                raise ArchiveRefused(name, _ratio_message(self.unpacked, self.size, lim)
                                     + f" (crossed at member {name[:300]!r})")
        if not comps:
            if info.isdir():
                return  # "." or "./": the destination itself
            raise _refuse(name, "has an empty path")
        node = self.root
        nodes = [node]
        for i, c in enumerate(comps[:-1]):
            child = node.get(c)
            if child is None:
                child = node[c] = {"": None}
            elif isinstance(child, tuple):
                raise _refuse(name, f"goes through the symbolic link {'/'.join(comps[:i + 1])!r} (an earlier member); "
                                    "a link must not be written through")
            elif not isinstance(child, dict):
                raise _refuse(name, f"is inside {'/'.join(comps[:i + 1])!r}, an earlier member that is a file")
            node = child
            nodes.append(node)
        last = comps[-1]
        existing = node.get(last)
        if existing is not None:
            if not isinstance(existing, dict) or existing[""] is not None:
                raise _refuse(name, "appears twice in the archive")
            if not info.isdir():
                raise _refuse(name, "replaces a directory that holds earlier members")
            existing[""] = "d"
        elif info.isdir():
            node[last] = {"": "d"}
        elif info.isreg():
            node[last] = "f"
        else:
            target = info.linkname
            if not target:
                raise _refuse(name, "is a symbolic link with an empty target")
            if target.startswith(("/", "\\")) or os.path.isabs(target):
                raise _refuse(name, f"is a symbolic link to an absolute path {target[:300]!r}; " + _RULE)
            if "\x00" in target or len(os.fsencode(target)) > lim.max_name_bytes:
                raise _refuse(name, f"has a symbolic link target that is not a path of at most "
                                    f"{lim.max_name_bytes} bytes")
            depth = len(comps) - 1
            for c in target.split("/"):
                if c == "..":
                    depth -= 1
                    if depth < 0:
                        raise _refuse(name, f"is a symbolic link leaving the tree ({target[:300]!r}); " + _RULE)
                elif c not in ("", "."):
                    depth += 1
            node[last] = (target,)
            self.links.append((name, nodes, target))

    def resolve_links(self) -> None:
        """Follow every symlink through the links the archive makes: none may end outside the tree."""
        budget = 32 * self.members + 4096
        for name, nodes, target in self.links:
            path_nodes: list[_Node | None] = list(nodes)
            todo = target.split("/")[::-1]
            hops = steps = 0
            while todo:
                steps += 1
                budget -= 1
                if steps > _LINK_STEPS or budget < 0:
                    raise _refuse(name, "is a symbolic link that takes too many steps to resolve")
                c = todo.pop()
                if c in ("", "."):
                    continue
                if c == "..":
                    if len(path_nodes) == 1:
                        raise _refuse(name, f"is a symbolic link leaving the tree through other links "
                                            f"({target[:300]!r}); " + _RULE)
                    path_nodes.pop()
                    continue
                parent = path_nodes[-1]
                child = parent.get(c) if parent is not None else None
                if isinstance(child, tuple):
                    hops += 1
                    if hops > _MAX_LINK_HOPS:
                        raise _refuse(name, f"is a symbolic link that goes through more than {_MAX_LINK_HOPS} links")
                    todo.extend(child[0].split("/")[::-1])  # relative to the directory it sits in
                    continue
                path_nodes.append(child if isinstance(child, dict) else None)


class _BadHeader(Exception):
    """Raised through tarfile (not a HeaderError, which tarfile past the first member takes for the end)."""


_END_OF_ARCHIVE: tuple[type[Exception], ...] = (tarfile.EOFHeaderError, tarfile.EmptyHeaderError)  # type: ignore[attr-defined]


class _StrictInfo(tarfile.TarInfo):
    """A damaged header is an error, not the silent end of the archive that tarfile makes of it."""

    @classmethod
    def frombuf(cls, buf: bytes, encoding: str, errors: str) -> tarfile.TarInfo:  # type: ignore[override]
        try:
            return super().frombuf(buf, encoding, errors)
        except _END_OF_ARCHIVE:
            raise  # zero blocks, or the end of the stream: the end of the archive
        except tarfile.HeaderError as exc:
            raise _BadHeader(str(exc)) from None

    @classmethod
    def _frombuf(cls, buf: bytes, encoding: str, errors: str, **kwargs: object) -> tarfile.TarInfo:
        # Pythons with the 2025 tarfile fixes (Debian's 3.11.2 since then, 3.12.10+) read headers through
        # _frombuf, not frombuf: the same strictness there.
        try:
            return super()._frombuf(buf, encoding, errors, **kwargs)  # type: ignore[misc]
        except _END_OF_ARCHIVE:
            raise
        except tarfile.HeaderError as exc:
            raise _BadHeader(str(exc)) from None


def _archive_size(fileobj: IO[bytes]) -> int | None:
    try:
        if not fileobj.seekable():
            return None
        pos = fileobj.tell()
        end = fileobj.seek(0, os.SEEK_END)
        fileobj.seek(pos)
        return max(end - pos, 0)
    except (OSError, AttributeError, ValueError):
        return None


def check_archive(fileobj: IO[bytes], limits: ArchiveLimits = DEFAULT_LIMITS) -> ArchiveSummary:
    """Read the tar.gz in ``fileobj`` (from where it stands, to its end) and refuse it unless it is a plain code tree.

    Streams: nothing is extracted and no list of members is kept, only the tree of names (for
    duplicates and paths through links); each cap is checked as soon as the bytes are known
    (header sizes before any data is read, decompressed bytes as they come), so a bomb stops
    within a few hundred KiB of where it crosses a cap. Raises ``ArchiveRefused`` (naming the
    member) for a rule, ``SnapshotError`` for data that is not a gzip-compressed tar.
    """
    return _check(fileobj.read, _archive_size(fileobj), limits)


def _check(read: Callable[[int], bytes], size: int | None, limits: ArchiveLimits) -> ArchiveSummary:
    if size is not None and size > limits.max_bytes:
        raise ArchiveRefused(None, f"archive is larger than {human_bytes(limits.max_bytes)} "
                                   f"(limit {limits.max_bytes} bytes)")
    stream = _Inflater(read, size, limits)
    checker = _Checker(limits, size)
    try:
        with tarfile.open(fileobj=stream, mode="r|", bufsize=_TAR_BUFSIZE,  # type: ignore[call-overload]
                          tarinfo=_StrictInfo) as tar:
            while (info := tar.next()) is not None:
                tar.members.clear()  # stream mode would keep every header
                checker.member(info)
                stream.budget = stream.out + _block(info.size) + _HEADER_SLACK
                stream.over_budget = (info.name, f"archive headers after member {info.name[:300]!r} are larger "
                                                 f"than {human_bytes(_HEADER_SLACK)} (a hostile extended header)")
            stream.budget = stream.out + _TRAILER_BYTES
            stream.over_budget = (None, f"archive has more than {human_bytes(_TRAILER_BYTES)} "
                                        "after the end of its tar data")
            # tar's end is zero blocks; anything else after it (read through tarfile's own buffer) would be
            # members tarfile never shows, or a damaged header it took for the end
            while chunk := tar.fileobj.read(_IN_CHUNK):
                if chunk.count(0) != len(chunk):
                    raise ArchiveRefused(None, "archive has data after the end of its tar data")
    except SnapshotError:
        raise
    except OSError as exc:
        raise SnapshotError(f"cannot read the archive: {exc}") from exc
    except tarfile.ReadError as exc:
        raise SnapshotError(f"not a tar.gz archive: {exc}") from None
    except _BadHeader as exc:
        if checker.last is None:
            raise SnapshotError(f"not a tar.gz archive: it does not start with a tar header ({exc})") from None
        raise SnapshotError(f"not a valid tar.gz archive: a damaged tar header after member "
                            f"{checker.last[:300]!r} ({exc})") from None
    except Exception as exc:  # tarfile on hostile headers: ValueError, UnicodeError, OverflowError, StreamError...
        raise SnapshotError(f"not a valid tar.gz archive: {type(exc).__name__}: {str(exc)[:300]}") from None
    checker.resolve_links()
    return ArchiveSummary(members=checker.members, unpacked_bytes=checker.unpacked)


def _iter_tree(root: Path, excludes: frozenset[str]) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in excludes)
        base = Path(dirpath)
        for d in dirnames:
            out.append(base / d)
        for f in sorted(filenames):
            if f not in excludes and not f.endswith(".pyc"):
                out.append(base / f)
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def _lexically_inside(rel: str, target: str) -> bool:
    if target.startswith("/") or os.path.isabs(target):
        return False
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return joined != ".." and not joined.startswith("../")


def pack(root: str | Path, *, excludes: frozenset[str] = DEFAULT_EXCLUDES, limit: int = MAX_SNAPSHOT_BYTES,
         limits: ArchiveLimits = DEFAULT_LIMITS) -> bytes:
    """The deterministic tar.gz of ``root``; refuses (naming the path) what ``check_archive`` would refuse later.

    Each entry goes through the same checks as an upload as it is added (too many files, too deep,
    names too long), and the finished archive through ``check_archive`` itself, so a user learns
    at pack time. Links leaving the tree (absolute ones included) are left out, as before.
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise SnapshotError(f"{root} is not a directory")
    raw = io.BytesIO()
    total = 0
    checker = _Checker(limits, None)
    try:
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in _iter_tree(root, excludes):
                rel = path.relative_to(root).as_posix()
                info = tarfile.TarInfo(rel)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if path.is_symlink():
                    target = os.readlink(path)
                    resolved = (path.parent / target).resolve()
                    if not resolved.is_relative_to(root) or not _lexically_inside(rel, target):
                        continue  # a link leaving the tree is not part of the code
                    info.type = tarfile.SYMTYPE
                    info.linkname = target
                    info.mode = 0o777
                    checker.member(info)
                    tar.addfile(info)
                elif path.is_dir():
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    checker.member(info)
                    tar.addfile(info)
                elif path.is_file():
                    st = path.stat()
                    total += st.st_size
                    if total > limit:
                        raise SnapshotError(
                            f"{root} holds more than {limit} bytes of code; keep data out of the code directory"
                        )
                    info.size = st.st_size
                    info.mode = 0o755 if st.st_mode & 0o111 else 0o644
                    checker.member(info)
                    with path.open("rb") as fh:
                        tar.addfile(info, fh)
        checker.resolve_links()
    except ArchiveRefused as exc:
        raise SnapshotError(f"cannot pack {root}: {exc}; keep data out of the code directory") from None
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    data = out.getvalue()
    try:
        check_archive(io.BytesIO(data), limits)
    except SnapshotError as exc:
        raise SnapshotError(f"cannot pack {root}: {exc}") from None
    return data


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def unpack(archive: str | Path, dest: str | Path, *, sha256: str | None = None,
           limits: ArchiveLimits = DEFAULT_LIMITS) -> None:
    """Extract the archive at ``archive`` into ``dest`` if ``check_archive`` accepts it; with ``sha256``,
    only if its bytes match it."""
    try:
        fh = open(archive, "rb")
    except OSError as exc:
        raise SnapshotError(f"cannot unpack code snapshot: {exc}") from exc
    with fh:
        if sha256 is not None:
            unpack_verified(fh, sha256, dest, limits=limits)
            return
        _check_and_extract(fh, Path(dest), limits, "code snapshot")


def _check_and_extract(fh: IO[bytes], dest: Path, limits: ArchiveLimits, what: str) -> None:
    """``check_archive`` on ``fh`` (from where it stands), then extract it into ``dest`` (made only if it passed)."""
    start = fh.tell()
    check_archive(fh, limits)
    fh.seek(start)
    try:
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=fh, mode="r:gz") as tar:
            safe_extractall(tar, dest, limits)
    except (tarfile.TarError, OSError) as exc:
        raise SnapshotError(f"cannot unpack {what}: {exc}") from exc


def unpack_verified(fileobj: IO[bytes], expected_sha256: str, dest: str | Path,
                    *, limit: int | None = None, limits: ArchiveLimits = DEFAULT_LIMITS) -> None:
    """Extract the tar.gz read from ``fileobj`` into ``dest`` if, and only if, its sha256 is ``expected_sha256``
    and ``check_archive`` accepts it.

    The whole archive is read first, hashed as it is copied into a private temporary file (in
    memory up to 32 MiB; an unlinked file beyond), and only that copy is checked and extracted:
    a file changed after the check cannot change what is extracted. On a mismatch or a refusal
    nothing is extracted (``dest`` is not even created); a mismatch says the code store was
    modified. ``limit`` (compressed bytes) overrides ``limits.max_bytes``. ``fileobj`` is read
    from where it stands; it is not closed.
    """
    sha = str(expected_sha256)
    if not _SHA256_RE.fullmatch(sha):
        raise SnapshotError("not a sha256 digest")
    if limit is not None:
        limits = dataclasses.replace(limits, max_bytes=limit)
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as copy:
        h = hashlib.sha256()
        total = 0
        try:
            while chunk := fileobj.read(1024 * 1024):
                total += len(chunk)
                if total > limits.max_bytes:
                    raise SnapshotError(f"code snapshot {sha} is larger than {limits.max_bytes} bytes")
                h.update(chunk)
                copy.write(chunk)
        except OSError as exc:
            raise SnapshotError(f"cannot read code snapshot {sha}: {exc}") from exc
        if not hmac.compare_digest(h.hexdigest(), sha):
            raise SnapshotError(f"code snapshot {sha} does not match its digest: the code store was modified")
        copy.seek(0)
        _check_and_extract(copy, Path(dest), limits, f"code snapshot {sha}")


class _Tee:
    """Reads ``src`` for ``check_archive``, hashing every byte and copying it to ``out`` (when given)."""

    def __init__(self, src: IO[bytes], out: IO[bytes] | None) -> None:
        self.src, self.out = src, out
        self.sha = hashlib.sha256()

    def read(self, n: int) -> bytes:
        data = self.src.read(n)
        if data:
            self.sha.update(data)
            if self.out is not None:
                self.out.write(data)
        return data


class CodeStore:
    """Content-addressed archives: ``<root>/<sha256>.tar.gz``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = self.root.stat()
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(self.root, 0o700)  # mkdir's mode is cut by the umask, and an older store was 0755

    def path(self, digest: str) -> Path:
        if not isinstance(digest, str) or not _SHA256_RE.fullmatch(digest):
            raise SnapshotError("not a sha256 digest")
        return self.root / f"{digest}.tar.gz"

    def has(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def put(self, digest: str, data: bytes) -> Path:
        self.put_file(digest, io.BytesIO(data))
        return self.path(digest)

    def put_file(self, digest: str, src: IO[bytes], limits: ArchiveLimits = DEFAULT_LIMITS) -> ArchiveSummary:
        """Check the archive read from ``src`` (from where it stands) and store it as ``digest``; blocking.

        One pass: the bytes are hashed, checked by ``check_archive`` and copied into a 0600
        temporary file in the store as they are read; the file is renamed into place only if the
        digest matches and the check passed, else removed: a refused archive leaves nothing. A
        snapshot already stored is verified and checked the same way (the uploader proves it has
        the bytes) but not rewritten. Thread-safe: no state is shared between calls.
        """
        target = self.path(digest)
        size = _archive_size(src)
        if size is not None and size > limits.max_bytes:
            raise ArchiveRefused(None, f"archive is larger than {human_bytes(limits.max_bytes)} "
                                       f"(limit {limits.max_bytes} bytes)")
        if target.exists():
            tee = _Tee(src, None)
            summary = self._checked(tee, size, limits, digest)
            return summary
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{digest[:16]}.", suffix=".tmp")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as fh:
                summary = self._checked(_Tee(src, fh), size, limits, digest)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
        return summary

    @staticmethod
    def _checked(tee: _Tee, size: int | None, limits: ArchiveLimits, digest: str) -> ArchiveSummary:
        try:
            summary = _check(tee.read, size, limits)
            while tee.read(_IN_CHUNK):  # check_archive read to the end already; this is a belt
                pass
        except OSError as exc:
            raise SnapshotError(f"cannot read the archive: {exc}") from exc
        if not hmac.compare_digest(tee.sha.hexdigest(), digest):
            raise SnapshotError("archive does not match its digest")
        return summary
