"""safe_extractall against hostile archives, with this Python's tarfile and with its data filter absent (3.11.2).

Every case checks the one property that matters: nothing lands outside the destination, whatever
the archive says; and a plain archive (files, dirs, links inside) extracts as packed.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from tacc_hub import safetar, snapshot
from tacc_hub.safetar import safe_extractall


@pytest.fixture(params=["native", "fallback"])
def mode(request, monkeypatch):
    if request.param == "fallback":
        # What Debian 12's Python 3.11.2 has: no tarfile.data_filter, no extractall(filter=...).
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
        real = tarfile.TarFile.extractall

        def old_extractall(self, path=".", members=None, *, numeric_owner=False, **kw):
            assert "filter" not in kw, "the fallback must not pass filter= (TypeError on 3.11.2)"
            return real(self, path, members, numeric_owner=numeric_owner)

        monkeypatch.setattr(tarfile.TarFile, "extractall", old_extractall)
    # "native": whatever this Python has (the data filter from 3.11.4 on; the fallback on 3.11.2)
    return request.param


def build(*members: tuple[str, str, object]) -> tarfile.TarFile:
    """members: (kind, name, arg): ("file", name, bytes|mode) ("dir", name, mode) ("sym"|"hard", name, target) ..."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for kind, name, arg in members:
            info = tarfile.TarInfo(name)
            data = b""
            if kind == "file":
                data, info.mode = (arg, 0o644) if isinstance(arg, bytes) else (b"x", int(arg))  # type: ignore[call-overload]
                info.size = len(data)
            elif kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, int(arg)  # type: ignore[call-overload]
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, str(arg)
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, str(arg)
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            elif kind == "chr":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            tar.addfile(info, io.BytesIO(data) if data else None)
    raw.seek(0)
    return tarfile.open(fileobj=raw, mode="r")


def tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.fixture
def box(tmp_path: Path) -> tuple[Path, Path]:
    """(dest, outside): dest sits in a sandbox whose other contents must never change."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("original")
    dest = tmp_path / "dest"
    return dest, tmp_path


def untouched(sandbox: Path, *mine: str) -> None:
    assert (sandbox / "outside" / "victim").read_text() == "original"
    assert {p.name for p in sandbox.iterdir()} <= {"outside", "dest", *mine}
    assert tree(sandbox / "outside") == {"victim"}
    assert not Path("/tmp/tacc-safetar-pwned").exists()


HOSTILE: dict[str, list[tuple[str, str, object]]] = {
    "absolute": [("file", "/tmp/tacc-safetar-pwned", b"x")],
    "dotdot": [("file", "../outside/victim", b"pwned")],
    "dotdot-deep": [("dir", "a", 0o755), ("file", "a/../../outside/new", b"pwned")],
    "symlink-absolute": [("sym", "link", "/tmp"), ("file", "link/tacc-safetar-pwned", b"x")],
    "symlink-out": [("sym", "link", "../outside"), ("file", "link/victim", b"pwned")],
    "symlink-to-file-out": [("sym", "v", "../outside/victim"), ("file", "v", b"pwned")],
    "symlink-chain": [("sym", "a", "b/b/b/../.."), ("sym", "b", "."), ("file", "a/outside/victim", b"pwned")],
    "hardlink-out": [("hard", "h", "../outside/victim")],
    "hardlink-absolute": [("hard", "h", str(Path("/etc/hostname")))],
    "fifo": [("fifo", "pipe", None)],
    "device": [("chr", "null", None)],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archives_write_nothing_outside(case, mode, box):
    dest, sandbox = box
    with build(*HOSTILE[case]) as tar, pytest.raises(tarfile.TarError):
        safe_extractall(tar, dest)
    untouched(sandbox)
    for p in dest.rglob("*") if dest.exists() else []:
        assert not stat.S_ISFIFO(p.lstat().st_mode) and not stat.S_ISCHR(p.lstat().st_mode)
        if p.is_symlink():
            assert os.path.realpath(p).startswith(str(dest.resolve()))


def test_a_plain_archive_extracts_as_packed_and_modes_are_sane(mode, box):
    dest, sandbox = box
    members = [("dir", "pkg", 0o700), ("file", "pkg/run.sh", 0o4777), ("file", "pkg/data.txt", b"hello"),
               ("sym", "pkg/alias", "data.txt"), ("hard", "pkg/copy", "pkg/data.txt"), ("dir", "ro", 0o555),
               ("file", "ro/inside", b"ok")]
    with build(*members) as tar:
        safe_extractall(tar, dest)
    untouched(sandbox)
    assert tree(dest) == {"pkg", "pkg/run.sh", "pkg/data.txt", "pkg/alias", "pkg/copy", "ro", "ro/inside"}
    assert (dest / "pkg" / "alias").read_text() == "hello" and os.readlink(dest / "pkg" / "alias") == "data.txt"
    assert (dest / "pkg" / "copy").read_text() == "hello"
    run_mode = stat.S_IMODE((dest / "pkg" / "run.sh").stat().st_mode)
    assert run_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | 0o022) == 0 and run_mode & 0o100
    assert (dest / "ro" / "inside").read_text() == "ok"


def test_snapshot_unpack_uses_it(mode, box, tmp_path):
    dest, sandbox = box
    archive = tmp_path / "evil.tar.gz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("../outside/victim")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"pwned"))
    archive.write_bytes(raw.getvalue())
    with pytest.raises(snapshot.SnapshotError):
        snapshot.unpack(archive, dest)
    untouched(sandbox, "evil.tar.gz")
    code = tmp_path / "code"
    (code / "sub").mkdir(parents=True)
    (code / "sub" / "train.py").write_text("print(1)\n")
    packed = tmp_path / "good.tar.gz"
    packed.write_bytes(snapshot.pack(code))
    snapshot.unpack(packed, tmp_path / "out")
    assert (tmp_path / "out" / "sub" / "train.py").read_text() == "print(1)\n"
    assert safetar.UnsafeArchiveError.__mro__[1] is tarfile.TarError


# --- caps at extraction time (ArchiveLimits) -------------------------------------------------------


@pytest.mark.parametrize(("limits", "message"), [
    (safetar.ArchiveLimits(max_members=3), "archive has more than 3 members (limit reached at 'pkg/b')"),
    (safetar.ArchiveLimits(max_unpacked_bytes=9), "archive unpacks to more than 9 bytes (limit 9 bytes, crossed at "
                                                  "member 'pkg/b')"),
    (safetar.ArchiveLimits(max_depth=1), "archive member 'pkg/a' is more than 1 directories deep"),
    (safetar.ArchiveLimits(max_name_bytes=4), "has a name longer than 4 bytes"),
])
def test_caps_stop_extraction_before_anything_is_written(mode, box, monkeypatch, limits, message):
    dest, sandbox = box
    monkeypatch.setattr(tarfile.TarFile, "getmembers", lambda self: pytest.fail("getmembers() on an unbounded archive"))
    members = [("dir", "pkg", 0o755), ("file", "pkg/a", b"12345"), ("file", "pkg/c", b"1234"),
               ("file", "pkg/b", b"x"), ("file", "pkg/d", b"y")]
    with build(*members) as tar, pytest.raises(safetar.UnsafeArchiveError) as exc:
        safe_extractall(tar, dest, limits)
    assert message in str(exc.value)
    assert tree(dest) == set()
    untouched(sandbox)
    with build(*members) as tar:
        safe_extractall(tar, dest, safetar.ArchiveLimits(max_members=5, max_unpacked_bytes=11, max_depth=2))
    assert tree(dest) == {"pkg", "pkg/a", "pkg/b", "pkg/c", "pkg/d"}


def test_the_member_cap_stops_reading_headers(mode, box):
    """An archive of many members is not read to its end when the cap is crossed early."""
    dest, _ = box
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for i in range(3000):
            tar.addfile(tarfile.TarInfo(f"f{i}"))
    raw.seek(0)
    with tarfile.open(fileobj=raw, mode="r:gz") as tar:
        with pytest.raises(safetar.UnsafeArchiveError, match="more than 10 members"):
            safe_extractall(tar, dest, safetar.ArchiveLimits(max_members=10))
        assert len(tar.members) == 11 and not tar._loaded  # type: ignore[attr-defined]
    assert tree(dest) == set()


def test_the_default_limits_are_those_of_snapshot():
    assert snapshot.DEFAULT_LIMITS is safetar.DEFAULT_LIMITS and snapshot.ArchiveLimits is safetar.ArchiveLimits
    lim = safetar.DEFAULT_LIMITS
    assert (lim.max_bytes, lim.max_unpacked_bytes, lim.max_members, lim.max_depth, lim.max_name_bytes,
            lim.max_ratio, lim.ratio_floor_bytes) == (256 << 20, 4 << 30, 100_000, 64, 4096, 200, 64 << 20)
    with pytest.raises(AttributeError):
        lim.max_members = 1  # type: ignore[misc]
