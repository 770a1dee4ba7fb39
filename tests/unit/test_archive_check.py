"""check_archive, CodeStore.put_file and pack against hostile archives (issue 18).

Every hostile archive is built here with tarfile and zlib, then attacked through the same paths
the service and the launcher use: ``check_archive`` on a file, ``CodeStore.put_file`` (nothing may be
left in the store), ``unpack_verified`` (nothing may be extracted). Bombs are checked for how much
they make the checker read and spend: a cap must stop them early, not after the whole stream.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import struct
import tarfile
import threading
import time
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import pytest

from tacc_hub import snapshot
from tacc_hub.snapshot import (
    DEFAULT_LIMITS,
    ArchiveLimits,
    ArchiveRefused,
    ArchiveSummary,
    CodeStore,
    SnapshotError,
    check_archive,
    digest_of,
    pack,
    unpack_verified,
)

RULE = "code archives hold files, directories and symbolic links inside the tree"


def gz(chunks: Iterable[bytes], level: int = 6) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    out = io.BytesIO()
    for chunk in chunks:
        out.write(c.compress(chunk))
    out.write(c.flush())
    return out.getvalue()


class _Info(tarfile.TarInfo):
    """A TarInfo that carries its data (TarInfo has __slots__)."""

    data = b""


def M(name: str, kind: str = "file", arg: object = b"", **attrs: object) -> _Info:
    """A member: kind file (arg: data), dir, sym/hard (arg: target), fifo, chr, blk, or a raw type byte."""
    info = _Info(name)
    info.mtime = 0
    types = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE,
             "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE, "file": tarfile.REGTYPE}
    info.type = types[kind] if kind in types else kind.encode()
    if kind in ("sym", "hard"):
        info.linkname = str(arg)
    elif kind == "file":
        assert isinstance(arg, bytes)
        info.size = len(arg)
        info.data = arg
    for k, v in attrs.items():
        setattr(info, k, v)
    return info


def tgz(*members: tarfile.TarInfo, fmt: Literal[0, 1, 2] = tarfile.PAX_FORMAT) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as tar:
        for m in members:
            data = getattr(m, "data", b"")
            tar.addfile(m, io.BytesIO(data) if data else None)
    return gz([raw.getvalue()])


class Counting(io.BytesIO):
    """A seekable upload that counts the bytes read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.nread = 0

    def read(self, n: int | None = -1) -> bytes:
        data = super().read(n)
        self.nread += len(data)
        return data


class Unseekable:
    """A pipe-like upload: no seek, no size known in advance."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)
        self.nread = 0

    def seekable(self) -> bool:
        return False

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self.nread += len(data)
        return data


def zero_bomb(head: bytes, mib: int, tail: bytes = bytes(1024)) -> bytes:
    """A valid gzip stream of ``head``, ``mib`` MiB of zeros, ``tail``; fast to build (one compressed MiB, repeated).

    After a full flush deflate keeps no history, so every MiB of zeros compresses to the same bytes.
    """
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    z = bytes(1 << 20)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(z) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.compress(tail) + c.flush()
    crc = zlib.crc32(head)
    for _ in range(mib):
        crc = zlib.crc32(z, crc)
    crc = zlib.crc32(tail, crc)
    size = (len(head) + (mib << 20) + len(tail)) & 0xFFFFFFFF
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03" + first + block * mib + last + struct.pack("<II", crc, size)


def test_zero_bomb_is_valid_gzip():
    data = zero_bomb(b"head", 3, b"tail")
    assert zlib.decompress(data, 31) == b"head" + bytes(3 << 20) + b"tail"


def raw_header(name: str, type_: bytes, size: int, fmt: Literal[0, 1, 2] = tarfile.USTAR_FORMAT) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = type_, size
    return info.tobuf(fmt)


@pytest.fixture
def store(tmp_path: Path) -> CodeStore:
    return CodeStore(tmp_path / "code")


def refuse(data: bytes, limits: ArchiveLimits = DEFAULT_LIMITS) -> ArchiveRefused:
    with pytest.raises(ArchiveRefused) as exc:
        check_archive(io.BytesIO(data), limits)
    return exc.value


# --- a plain tree passes and round-trips --------------------------------------------------------


def _tree(root: Path) -> Path:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "train.py").write_text("print('train')\n" * 50)
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "alias.py").symlink_to("pkg/sub/train.py")
    (root / "pkg" / "up").symlink_to("../run.sh")
    (root / "pkg" / "subdir-link").symlink_to("sub")
    return root


def test_a_packed_tree_passes_and_round_trips_through_put_file_and_unpack_verified(store, tmp_path):
    data = pack(_tree(tmp_path / "src"))
    assert pack(tmp_path / "src") == data  # still deterministic
    summary = store.put_file(digest_of(data), io.BytesIO(data))
    code_bytes = len("print('train')\n") * 50 + len("#!/bin/sh\necho hi\n")
    assert summary == ArchiveSummary(members=8, unpacked_bytes=code_bytes)
    path = store.path(digest_of(data))
    assert path.read_bytes() == data and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(os.listdir(store.root)) == [path.name]  # no temporary file left
    with open(path, "rb") as fh:
        unpack_verified(fh, digest_of(data), tmp_path / "out")
    out = tmp_path / "out"
    assert (out / "alias.py").read_text() == "print('train')\n" * 50
    assert os.readlink(out / "alias.py") == "pkg/sub/train.py"
    assert (out / "pkg" / "up").read_text().startswith("#!/bin/sh") and os.access(out / "run.sh", os.X_OK)
    assert os.readlink(out / "pkg" / "subdir-link") == "sub"
    assert check_archive(io.BytesIO(data)) == summary
    assert store.put(digest_of(data), data) == path  # the old API still works, and does not rewrite


def test_an_archive_from_plain_tar_with_dot_entries_passes(tmp_path):
    data = tgz(M(".", "dir"), M("./a", "dir"), M("./a/x.py", arg=b"x = 1\n"), M("./a/l", "sym", "x.py"))
    assert check_archive(io.BytesIO(data)) == ArchiveSummary(members=4, unpacked_bytes=6)


def test_a_stored_snapshot_is_verified_and_checked_again_but_not_rewritten(store, tmp_path):
    data = pack(_tree(tmp_path / "src"))
    sha = digest_of(data)
    store.put_file(sha, io.BytesIO(data))
    before = store.path(sha).stat()
    again = Counting(data)
    assert store.put_file(sha, again).members == 8
    assert again.nread == len(data)  # the uploader proved it has every byte
    after = store.path(sha).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    other = tgz(M("other.py", arg=b"2"))
    with pytest.raises(SnapshotError, match=r"^archive does not match its digest$"):
        store.put_file(sha, io.BytesIO(other))  # a valid archive, not the one named
    with pytest.raises(SnapshotError, match="corrupt gzip data"):
        store.put_file(sha, io.BytesIO(data[:-1] + bytes([data[-1] ^ 1])))  # the stored bytes, one flipped
    assert sorted(os.listdir(store.root)) == [f"{sha}.tar.gz"]


def test_a_digest_mismatch_stores_nothing(store, tmp_path):
    data = pack(_tree(tmp_path / "src"))
    with pytest.raises(SnapshotError, match=r"^archive does not match its digest$"):
        store.put_file("0" * 64, io.BytesIO(data))
    assert os.listdir(store.root) == []
    for bad in ("", "A" * 64, "0" * 63, "../" + "0" * 61, None):
        with pytest.raises(SnapshotError, match="not a sha256"):
            store.put_file(bad, io.BytesIO(data))


# --- rules: each names the member and the rule ----------------------------------------------------

HOSTILE: dict[str, tuple[list[tarfile.TarInfo], str | None, str]] = {
    "hard link inside": ([M("a", arg=b"x"), M("h", "hard", "a")], "h",
                         f"archive member 'h' is a hard link; {RULE}"),
    "hard link out": ([M("h", "hard", "../../etc/passwd")], "h", f"archive member 'h' is a hard link; {RULE}"),
    "char device": ([M("null", "chr", devmajor=1, devminor=3)], "null",
                    f"archive member 'null' is a character device; {RULE}"),
    "block device": ([M("sda", "blk", devmajor=8)], "sda", f"archive member 'sda' is a block device; {RULE}"),
    "fifo": ([M("d", "dir"), M("d/pipe", "fifo")], "d/pipe", f"archive member 'd/pipe' is a FIFO; {RULE}"),
    "unknown type": ([M("odd", "V")], "odd", f"archive member 'odd' is of type b'V'; {RULE}"),
    "absolute": ([M("/tmp/tacc-pwned", arg=b"x")], "/tmp/tacc-pwned", "has an absolute path"),
    "backslash absolute": ([M("\\evil", arg=b"x")], "\\evil", "has an absolute path"),
    "dotdot": ([M("a/../../x", arg=b"x")], "a/../../x", "leaves the tree (.. in its path)"),
    "dotdot long pax name": ([M("../" + "x" * 300, arg=b"x")], "../" + "x" * 300, "leaves the tree"),
    "duplicate file": ([M("a.py", arg=b"1"), M("b.py"), M("a.py", arg=b"2")], "a.py",
                       "archive member 'a.py' appears twice in the archive"),
    "duplicate via ./": ([M("a.py", arg=b"1"), M("./a.py", arg=b"2")], "./a.py", "appears twice"),
    "duplicate dir": ([M("d", "dir"), M("d/", "dir")], "d", "appears twice"),
    "inside a file": ([M("a", arg=b"x"), M("a/b", arg=b"y")], "a/b", "is inside 'a', an earlier member that is a file"),
    "file replaces dir": ([M("d/x", arg=b"x"), M("d", arg=b"y")], "d",
                          "replaces a directory that holds earlier members"),
    "symlink replaces dir": ([M("d/x", arg=b"x"), M("d", "sym", "/etc")], "d", "replaces a directory"),
    "symlink replaces dir inside": ([M("e", "dir"), M("d/x", arg=b"x"), M("d", "sym", "e")], "d",
                                    "replaces a directory that holds earlier members"),
    "symlink absolute": ([M("l", "sym", "/etc")], "l", f"is a symbolic link to an absolute path '/etc'; {RULE}"),
    "symlink out": ([M("d", "dir"), M("d/l", "sym", "../../outside")], "d/l",
                    f"archive member 'd/l' is a symbolic link leaving the tree ('../../outside'); {RULE}"),
    "symlink out and back": ([M("l", "sym", "../src/x")], "l", "leaving the tree"),
    "symlink empty": ([M("l", "sym", "")], "l", "empty target"),
    "write through link": ([M("sub", "dir"), M("l", "sym", "sub"), M("l/x.py", arg=b"pwned")], "l/x.py",
                           "goes through the symbolic link 'l' (an earlier member)"),
    "write through deep link": ([M("a/b", "dir"), M("a/b/l", "sym", "."), M("a/b/l/c/x", arg=b"x")], "a/b/l/c/x",
                                "goes through the symbolic link 'a/b/l'"),
    "link chain": ([M("a", "sym", "b/b/b/../.."), M("b", "sym", ".")], "a", "leaving the tree through other links"),
    "link chain later": ([M("x/a", "sym", "../b/.."), M("b", "sym", "c/../..")], "b", "leaving the tree ('c/../..')"),
    "link chain two hops": ([M("d", "dir"), M("d/a", "sym", "../e/f/.."), M("e", "sym", "d"),
                             M("g", "sym", "e/a/../..")], "g", "through other links"),
    "link loop": ([M("a", "sym", "b"), M("b", "sym", "a")], "a", "goes through more than 40 links"),
    "deep path": ([M("/".join(["d"] * 65), arg=b"x")], "/".join(["d"] * 65), "more than 64 directories deep"),
    "long name": ([M("a/" * 1000 + "x" * 2100, arg=b"x")], "a/" * 1000 + "x" * 2100, "longer than 4096 bytes"),
    "long component": ([M("x" * 256, arg=b"x")], "x" * 256, "component longer than 255 bytes"),
    "long link target": ([M("l", "sym", "a/" * 2049)], "l", "target that is not a path of at most 4096 bytes"),
    "pax size 1 TB": ([M("huge.bin", size=10**12)], "huge.bin", "archive unpacks to more than 4 GiB"),
    "empty name": ([M("", arg=b"x")], "", "empty name"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_members_are_refused_by_name_and_nothing_is_stored(case, store, tmp_path):
    members, member, message = HOSTILE[case]
    data = tgz(*members)
    exc = refuse(data)
    assert exc.member == member
    assert message in str(exc)
    if member:
        assert repr(member if len(member) <= 300 else member[:300] + "...") in str(exc)
    with pytest.raises(ArchiveRefused) as exc2:
        store.put_file(digest_of(data), io.BytesIO(data))
    assert str(exc2.value) == str(exc)
    assert os.listdir(store.root) == []
    with pytest.raises(SnapshotError):
        unpack_verified(io.BytesIO(data), digest_of(data), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_gnu_format_long_names_and_sparse_files(tmp_path):
    long = "d/" * 60 + "f" * 200
    assert check_archive(io.BytesIO(tgz(M(long, arg=b"x"), fmt=tarfile.GNU_FORMAT))).members == 1
    raw = bytearray(raw_header("sparse", tarfile.GNUTYPE_SPARSE, 0, tarfile.GNU_FORMAT)) + bytes(1024)
    exc = refuse(gz([bytes(raw)]))
    assert exc.member == "sparse" and "is a sparse file" in str(exc)


# --- caps ----------------------------------------------------------------------------------------


def test_the_member_cap_stops_at_the_first_member_over_it():
    members = [M(f"f{i:05}", arg=os.urandom(64)) for i in range(5000)]
    data = tgz(*members)
    f = Counting(data)
    with pytest.raises(ArchiveRefused) as exc:
        check_archive(f, ArchiveLimits(max_members=100))
    assert exc.value.member == "f00100" and "archive has more than 100 members" in str(exc.value)
    assert f.nread < len(data) // 4
    assert check_archive(io.BytesIO(data), ArchiveLimits(max_members=5000)).members == 5000


def test_the_unpacked_cap_counts_file_sizes_from_headers():
    data = tgz(M("a", arg=b"x" * 600), M("b", "dir"), M("b/c", arg=b"y" * 400), M("d", arg=b"z" * 1))
    assert check_archive(io.BytesIO(data), ArchiveLimits(max_unpacked_bytes=1001)).unpacked_bytes == 1001
    assert refuse(data, ArchiveLimits(max_unpacked_bytes=1000)).member == "d"
    exc = refuse(data, ArchiveLimits(max_unpacked_bytes=999))
    assert exc.member == "b/c" and "archive unpacks to more than 999 bytes (limit 999 bytes" in str(exc)


def test_the_compressed_cap(store):
    data = tgz(M("a", arg=os.urandom(5000)))
    exc = refuse(data, ArchiveLimits(max_bytes=4096))
    assert exc.member is None and str(exc) == "archive is larger than 4 KiB (limit 4096 bytes)"
    with pytest.raises(ArchiveRefused, match="larger than 4 KiB"):
        check_archive(Unseekable(data), ArchiveLimits(max_bytes=4096))  # type: ignore[arg-type]
    with pytest.raises(ArchiveRefused, match="larger than 4 KiB"):
        store.put_file(digest_of(data), io.BytesIO(data), ArchiveLimits(max_bytes=4096))
    assert os.listdir(store.root) == []


def test_a_1_mib_bomb_of_1_gib_of_zeros_is_refused_at_its_header(store):
    info = tarfile.TarInfo("zeros.bin")
    info.size = 1 << 30
    data = zero_bomb(info.tobuf(tarfile.PAX_FORMAT), 1024)
    assert len(data) < 1100 * 1024
    f = Counting(data)
    t0 = time.process_time()
    with pytest.raises(ArchiveRefused) as exc:
        check_archive(f)
    assert time.process_time() - t0 < 0.5
    assert exc.value.member == "zeros.bin"
    assert "archive unpacks to more than 200 times its compressed size (1 GiB from" in str(exc.value)
    assert f.nread <= 64 * 1024
    f = Counting(data)
    with pytest.raises(ArchiveRefused, match="200 times"):
        store.put_file(hashlib.sha256(data).hexdigest(), f)
    assert f.nread <= 64 * 1024 and os.listdir(store.root) == []


def test_a_bomb_of_unknown_size_is_stopped_by_the_stream_ratio():
    info = tarfile.TarInfo("zeros.bin")
    info.size = 1 << 30
    data = zero_bomb(info.tobuf(tarfile.PAX_FORMAT), 1024)
    f = Unseekable(data)
    with pytest.raises(ArchiveRefused) as exc:
        check_archive(f)  # type: ignore[arg-type]
    assert "200 times its compressed size" in str(exc.value)
    assert f.nread <= 192 * 1024  # stopped just past the 64 MiB floor (~64 KiB in), not at the end (1 MiB)


def test_a_single_member_of_10_gib_is_refused_without_reading_it():
    info = tarfile.TarInfo("big.bin")
    info.size = 10 << 30
    data = zero_bomb(info.tobuf(tarfile.PAX_FORMAT), 8)
    for f in (Counting(data), Unseekable(data)):
        with pytest.raises(ArchiveRefused, match="unpacks to more than 4 GiB") as exc:
            check_archive(f)  # type: ignore[arg-type]
        assert exc.value.member == "big.bin" and f.nread <= 64 * 1024


def test_zeros_after_the_end_of_the_tar_are_capped():
    body = tgz(M("a.py", arg=b"x = 1\n"))
    raw = gzip_raw(body)
    data = zero_bomb(raw, 256)
    f = Unseekable(data)
    with pytest.raises(ArchiveRefused, match="archive has more than 1 MiB after the end of its tar data"):
        check_archive(f)  # type: ignore[arg-type]
    assert f.nread <= 64 * 1024


def gzip_raw(data: bytes) -> bytes:
    return zlib.decompress(data, 31)


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME,
                                  tarfile.GNUTYPE_LONGLINK])
def test_an_extended_header_claiming_a_huge_size_is_never_read_into_memory(kind):
    # a PAX / GNU long-name header of 1 GiB: tarfile would read it whole into memory
    data = zero_bomb(raw_header("././@Header", kind, 1 << 30), 64)
    f = Unseekable(data)
    with pytest.raises(ArchiveRefused, match="larger than 256 KiB") as exc:
        check_archive(f)  # type: ignore[arg-type]
    assert exc.value.member is None and f.nread <= 64 * 1024
    # and after a member, the message names it
    first = gzip_raw(tgz(M("ok.py", arg=b"1")))[:1024]
    data = zero_bomb(first + raw_header("././@Header", kind, 1 << 30), 64)
    exc2 = refuse(data)
    assert exc2.member == "ok.py" and "headers after member 'ok.py' are larger than 256 KiB" in str(exc2)


def test_a_sparse_map_bomb_is_bounded():
    # GNU sparse 1.0 (PAX): tarfile reads the map from the data, one number per line, unbounded
    pax = tarfile.TarInfo("s")
    pax.size = 10
    pax.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "s",
                       "GNU.sparse.realsize": "10"}
    head = pax.tobuf(tarfile.PAX_FORMAT)
    data = gz([head, b"99999999999\n", *(b"1\n" * 500_000 for _ in range(4))], level=9)
    t0 = time.process_time()
    with pytest.raises(SnapshotError):
        check_archive(Unseekable(data))  # type: ignore[arg-type]
    assert time.process_time() - t0 < 2


def test_many_tiny_members_at_the_cap_are_checked_in_bounded_time():
    n = 20_000
    data = tgz(*(M(f"d{i // 1000}/f{i}") for i in range(n)))
    t0 = time.process_time()
    assert check_archive(io.BytesIO(data)).members == n
    assert time.process_time() - t0 < 10  # ~35 us a member on a shared CI core (100k: ~3.5 s)


# --- not gzip, not tar ---------------------------------------------------------------------------


def test_what_is_not_a_tar_gz_is_a_snapshot_error_with_a_clear_message(store):
    good = tgz(M("a.py", arg=b"x = 1\n" * 1000), M("b.py", arg=os.urandom(3000)))
    cases = {
        "empty": (b"", "the file is empty"),
        "text": (b"hello world, this is not gzip", "not gzip data"),
        "plain tar": (gzip_raw(good), "not gzip data"),
        "gzip of text": (gz([b"just text, no tar header" * 40]), "not a tar.gz archive"),
        "gzip of noise": (gz([os.urandom(4096)]), "not a tar.gz archive"),
        "truncated": (good[: len(good) // 2], "the gzip stream is truncated"),
        "truncated trailer": (good[:-3], "the gzip stream is truncated"),
        "bad crc": (good[:-8] + bytes([good[-8] ^ 0xFF]) + good[-7:], "corrupt gzip data"),
        "trailing garbage": (good + b"garbage", "data after the end of its gzip stream"),
        "two gzip members": (good + good, "data after the end of its gzip stream"),
    }
    for name, (data, message) in cases.items():
        with pytest.raises(SnapshotError) as exc:
            check_archive(io.BytesIO(data))
        assert message in str(exc.value), (name, str(exc.value))
        with pytest.raises(SnapshotError):
            store.put_file(digest_of(data), io.BytesIO(data))
        assert os.listdir(store.root) == [], name


def test_a_damaged_header_is_not_taken_for_the_end_of_the_archive(store):
    # tarfile stops silently at a bad header after the first: what follows would go unchecked and unextracted
    raw = bytearray(gzip_raw(tgz(M("a.py", arg=b"1"), M("b.py", arg=b"2"), M("c.py", arg=b"3"))))
    raw[1024 + 148] ^= 0x01  # b.py's header checksum
    data = gz([bytes(raw)])
    with pytest.raises(SnapshotError, match=r"a damaged tar header after member 'a\.py'") as exc:
        check_archive(io.BytesIO(data))
    assert not isinstance(exc.value, ArchiveRefused)
    with pytest.raises(SnapshotError, match="damaged tar header"):
        store.put_file(digest_of(data), io.BytesIO(data))
    assert os.listdir(store.root) == []


def test_members_hidden_after_the_end_of_the_tar_are_refused():
    hidden = gzip_raw(tgz(M("evil.sh", arg=b"x")))
    end = gzip_raw(tgz(M("a.py", arg=b"1")))
    assert end.endswith(bytes(1024))
    exc = refuse(gz([end + hidden]))
    assert str(exc) == "archive has data after the end of its tar data"


def test_an_empty_archive_is_valid():
    # what pack() makes of an empty directory, and what tar makes of no files: zero blocks only
    assert check_archive(io.BytesIO(gz([bytes(10240)]))) == ArchiveSummary(members=0, unpacked_bytes=0)


def test_the_stream_is_read_from_where_it_stands():
    data = tgz(M("a.py", arg=b"1"))
    f = io.BytesIO(b"HEADER" + data)
    f.seek(6)
    assert check_archive(f).members == 1


# --- pack refuses what check_archive would --------------------------------------------------------


def test_pack_refuses_too_many_files_naming_the_path(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(12):
        (src / f"f{i:02}.py").write_text("")
    with pytest.raises(SnapshotError) as exc:
        pack(src, limits=ArchiveLimits(max_members=10))
    assert "more than 10 members" in str(exc.value) and "'f10.py'" in str(exc.value) and str(src) in str(exc.value)
    assert not isinstance(exc.value, ArchiveRefused) or True
    pack(src, limits=ArchiveLimits(max_members=12))


def test_pack_refuses_deep_and_long_paths(tmp_path):
    src = tmp_path / "src"
    (src / "a" / "b" / "c").mkdir(parents=True)
    with pytest.raises(SnapshotError, match="'a/b/c' has a path more than 2 directories deep"):
        pack(src, limits=ArchiveLimits(max_depth=2))
    with pytest.raises(SnapshotError, match="longer than 4 bytes"):
        pack(src, limits=ArchiveLimits(max_name_bytes=4))


def test_pack_leaves_out_links_check_archive_would_refuse(tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "x.py").write_text("1")
    (src / "abs").symlink_to(src / "x.py")  # absolute, though inside: refused by check_archive
    (src / "d" / "roundabout").symlink_to(f"../../{src.name}/x.py")  # inside, but only through the parent
    (src / "d" / "ok").symlink_to("../x.py")
    data = pack(src)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        assert tar.getnames() == ["d", "d/ok", "x.py"]
    check_archive(io.BytesIO(data))


def test_pack_refuses_a_tree_that_compresses_like_a_bomb(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "zeros.bin", "wb") as fh:
        fh.truncate(2 << 20)
    limits = ArchiveLimits(ratio_floor_bytes=1 << 20)
    with pytest.raises(SnapshotError, match="200 times its compressed size"):
        pack(src, limits=limits)


# --- launch applies the same rules ----------------------------------------------------------------


def test_unpack_verified_applies_the_limits(tmp_path):
    data = pack(_tree(tmp_path / "src"))
    with pytest.raises(ArchiveRefused, match="more than 3 members"):
        unpack_verified(io.BytesIO(data), digest_of(data), tmp_path / "out", limits=ArchiveLimits(max_members=3))
    assert not (tmp_path / "out").exists()
    bomb = tgz(M("a", arg=b"x" * 5000))
    with pytest.raises(ArchiveRefused, match="more than 4 KiB"):
        unpack_verified(io.BytesIO(bomb), digest_of(bomb), tmp_path / "out",
                        limits=ArchiveLimits(max_unpacked_bytes=4096))
    assert not (tmp_path / "out").exists()
    snapshot.unpack_verified(io.BytesIO(data), digest_of(data), tmp_path / "out")
    assert (tmp_path / "out" / "run.sh").exists()


# --- concurrency: the service calls put_file from threads ---------------------------------------


def test_put_file_from_many_threads(store, tmp_path):
    goods = []
    for i in range(6):
        src = tmp_path / f"src{i}"
        src.mkdir()
        (src / "train.py").write_text(f"print({i})\n")
        goods.append(pack(src))
    bads = [tgz(M(f"h{i}", "hard", "x")) for i in range(6)]
    barrier = threading.Barrier(12)

    def put(data: bytes) -> str:
        barrier.wait()
        try:
            return f"ok {store.put_file(digest_of(data), io.BytesIO(data)).members}"
        except ArchiveRefused as exc:
            return f"refused {exc.member}"

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(put, goods + bads))
    assert results == ["ok 1"] * 6 + [f"refused h{i}" for i in range(6)]
    assert sorted(os.listdir(store.root)) == sorted(f"{digest_of(g)}.tar.gz" for g in goods)
