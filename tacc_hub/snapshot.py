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

Standard library only: the root launcher imports this module (and ``safetar``).
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import io
import os
import re
import stat
import tarfile
import tempfile
from pathlib import Path
from typing import IO

from tacc_hub.safetar import safe_extractall

DEFAULT_EXCLUDES = frozenset({
    ".git", "__pycache__", ".ipynb_checkpoints", ".venv", "venv", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", "node_modules", ".tox", ".DS_Store",
})
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_SPOOL_BYTES = 32 * 1024 * 1024  # archives up to this size are checked in memory, larger ones in a temporary file


class SnapshotError(ValueError):
    pass


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


def pack(root: str | Path, *, excludes: frozenset[str] = DEFAULT_EXCLUDES, limit: int = MAX_SNAPSHOT_BYTES) -> bytes:
    root = Path(root).resolve()
    if not root.is_dir():
        raise SnapshotError(f"{root} is not a directory")
    raw = io.BytesIO()
    total = 0
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
                if not resolved.is_relative_to(root):
                    continue  # a link leaving the tree is not part of the code
                info.type = tarfile.SYMTYPE
                info.linkname = target
                info.mode = 0o777
                tar.addfile(info)
            elif path.is_dir():
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
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
                with path.open("rb") as fh:
                    tar.addfile(info, fh)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def unpack(archive: str | Path, dest: str | Path, *, sha256: str | None = None) -> None:
    """Extract the archive at ``archive`` into ``dest``; with ``sha256``, only if its bytes match it."""
    if sha256 is not None:
        try:
            fh = open(archive, "rb")
        except OSError as exc:
            raise SnapshotError(f"cannot unpack code snapshot: {exc}") from exc
        with fh:
            unpack_verified(fh, sha256, dest)
        return
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive, mode="r:gz") as tar:
            safe_extractall(tar, dest)
    except (tarfile.TarError, OSError) as exc:
        raise SnapshotError(f"cannot unpack code snapshot: {exc}") from exc


def unpack_verified(fileobj: IO[bytes], expected_sha256: str, dest: str | Path,
                    *, limit: int = MAX_SNAPSHOT_BYTES) -> None:
    """Extract the tar.gz read from ``fileobj`` into ``dest`` if, and only if, its sha256 is ``expected_sha256``.

    The whole archive is read first, hashed as it is copied into a private temporary file (in
    memory up to 32 MiB; an unlinked file beyond), and only that copy is extracted: a file
    changed after the check cannot change what is extracted. On a mismatch nothing is
    extracted (``dest`` is not even created) and ``SnapshotError`` says the code store was
    modified. ``fileobj`` is read from where it stands; it is not closed.
    """
    sha = str(expected_sha256)
    if not _SHA256_RE.fullmatch(sha):
        raise SnapshotError("not a sha256 digest")
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as copy:
        h = hashlib.sha256()
        total = 0
        try:
            while chunk := fileobj.read(1024 * 1024):
                total += len(chunk)
                if total > limit:
                    raise SnapshotError(f"code snapshot {sha} is larger than {limit} bytes")
                h.update(chunk)
                copy.write(chunk)
        except OSError as exc:
            raise SnapshotError(f"cannot read code snapshot {sha}: {exc}") from exc
        if not hmac.compare_digest(h.hexdigest(), sha):
            raise SnapshotError(f"code snapshot {sha} does not match its digest: the code store was modified")
        copy.seek(0)
        dest = Path(dest)
        try:
            dest.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=copy, mode="r:gz") as tar:
                safe_extractall(tar, dest)
        except (tarfile.TarError, OSError) as exc:
            raise SnapshotError(f"cannot unpack code snapshot {sha}: {exc}") from exc


class CodeStore:
    """Content-addressed archives: ``<root>/<sha256>.tar.gz``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = self.root.stat()
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(self.root, 0o700)  # mkdir's mode is cut by the umask, and an older store was 0755

    def path(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise SnapshotError("not a sha256 digest")
        return self.root / f"{digest}.tar.gz"

    def has(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def put(self, digest: str, data: bytes) -> Path:
        if digest_of(data) != digest:
            raise SnapshotError("archive does not match its digest")
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
                for member in tar:
                    if member.name.startswith("/") or ".." in Path(member.name).parts:
                        raise SnapshotError(f"archive member {member.name!r} leaves the code tree")
        except tarfile.TarError as exc:
            raise SnapshotError(f"not a tar.gz archive: {exc}") from exc
        target = self.path(digest)
        if not target.exists():
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{digest[:16]}.", suffix=".tmp")  # mode 0600
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, target)
            except BaseException:
                os.unlink(tmp)
                raise
        return target
