"""The service's own state is private, and a code snapshot is what its sha256 says when it is unpacked.

The files are made under ``umask 0`` (the modes must not depend on the umask), in a directory other
accounts can traverse (so that only the file's own mode stands between them and it), and read or
written from ``alice``'s account, as a task would try.
"""

from __future__ import annotations

import io
import os
import pwd
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tacc_hub.snapshot import CodeStore, SnapshotError, digest_of, pack, unpack, unpack_verified
from tacc_hub.store import Store
from tests.accounts import ensure_accounts


@pytest.fixture(scope="session")
def alice() -> tuple[int, int]:
    ensure_accounts(("alice",))
    pw = pwd.getpwnam("alice")
    return pw.pw_uid, pw.pw_gid


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every account can traverse (not pytest's tmp, which is private to root), under umask 0."""
    path = Path(tempfile.mkdtemp(prefix="tacc-perms-"))
    path.chmod(0o711)
    old = os.umask(0)
    try:
        yield path
    finally:
        os.umask(old)
        subprocess.run(["rm", "-rf", str(path)], check=False)


def as_alice(alice: tuple[int, int], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), user=alice[0], group=alice[1], extra_groups=[], capture_output=True, text=True,
                          timeout=30)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- the database -----------------------------------------------------------------------


def test_sqlite_database_and_its_wal_are_0600_whatever_the_umask(open_dir, alice):
    db = open_dir / "tacc.sqlite"
    store = Store(f"sqlite:///{db}")
    try:
        store.migrate()
        store.add_token("bob", False, "h" * 64)
        files = [db, db.with_name("tacc.sqlite-wal"), db.with_name("tacc.sqlite-shm")]
        assert all(p.exists() for p in files)  # WAL mode: both exist while the database is open
        assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
        for p in files:  # from a task's account: nothing to read, nothing to write
            assert as_alice(alice, "cat", str(p)).returncode != 0
            assert as_alice(alice, "sh", "-c", f"echo x >> {p}").returncode != 0
    finally:
        store.close()


def test_an_older_world_readable_database_is_made_private(open_dir):
    db = open_dir / "tacc.sqlite"
    store = Store(f"sqlite:///{db}")
    store.migrate()
    store.close()
    for name in ("tacc.sqlite", "tacc.sqlite-wal", "tacc.sqlite-shm"):
        p = open_dir / name
        p.touch()
        p.chmod(0o644)
    Store(f"sqlite:///{db}").close()
    assert {n: mode(open_dir / n) for n in ("tacc.sqlite", "tacc.sqlite-wal", "tacc.sqlite-shm")} == {
        "tacc.sqlite": 0o600, "tacc.sqlite-wal": 0o600, "tacc.sqlite-shm": 0o600}


# --- the code store -----------------------------------------------------------------------


def _code(tmp: Path, text: str) -> bytes:
    src = tmp / f"src-{abs(hash(text))}"
    src.mkdir()
    (src / "train.py").write_text(text)
    return pack(src)


def test_code_store_is_0700_and_its_archives_0600(open_dir, alice):
    store = CodeStore(open_dir / "code")
    data = _code(open_dir, "print('bob')\n")
    path = store.put(digest_of(data), data)
    assert mode(open_dir / "code") == 0o700 and mode(path) == 0o600
    assert as_alice(alice, "ls", str(open_dir / "code")).returncode != 0
    assert as_alice(alice, "cat", str(path)).returncode != 0
    assert as_alice(alice, "sh", "-c", f"echo x > {path}").returncode != 0
    assert path.read_bytes() == data


def test_an_older_open_code_store_is_made_private(open_dir):
    (open_dir / "code").mkdir(mode=0o755)
    CodeStore(open_dir / "code")
    assert mode(open_dir / "code") == 0o700


# --- unpacking checks the digest -----------------------------------------------------------


def test_unpack_verified_extracts_a_matching_archive(tmp_path):
    data = _code(tmp_path, "print('ok')\n")
    unpack_verified(io.BytesIO(data), digest_of(data), tmp_path / "out")
    assert (tmp_path / "out" / "train.py").read_text() == "print('ok')\n"


def test_a_modified_snapshot_is_refused_before_anything_is_extracted(tmp_path):
    store = CodeStore(tmp_path / "code")
    good = _code(tmp_path, "print('bob')\n")
    sha = digest_of(good)
    path = store.put(sha, good)
    path.write_bytes(_code(tmp_path, "import os; os.system('steal')\n"))  # the store's file overwritten
    dest = tmp_path / "work"
    with open(path, "rb") as fh, pytest.raises(SnapshotError) as exc:
        unpack_verified(fh, sha, dest)
    assert str(exc.value) == f"code snapshot {sha} does not match its digest: the code store was modified"
    assert not dest.exists()
    with pytest.raises(SnapshotError, match="does not match its digest"):
        unpack(path, dest, sha256=sha)
    assert not dest.exists()
    # one flipped byte in the middle, too
    raw = bytearray(good)
    raw[len(raw) // 2] ^= 1
    with pytest.raises(SnapshotError, match="does not match its digest"):
        unpack_verified(io.BytesIO(bytes(raw)), sha, dest)
    assert not dest.exists()


def test_a_file_changed_after_the_check_does_not_change_what_is_extracted(tmp_path):
    """What is hashed is what is extracted: the archive is copied while hashing and that copy is unpacked."""
    good = _code(tmp_path, "print('checked')\n")
    evil = _code(tmp_path, "print('swapped in')\n")
    path = tmp_path / "a.tar.gz"
    path.write_bytes(good)

    class SwapAtEof(io.FileIO):
        def read(self, n: int = -1) -> bytes:  # type: ignore[override]
            data = super().read(n)
            if not data:  # the check has read everything: now the file changes (and rewinds would see it)
                path.write_bytes(evil)
            return data

    with SwapAtEof(str(path), "r") as fh:
        unpack_verified(fh, digest_of(good), tmp_path / "out")  # type: ignore[arg-type]
    assert (tmp_path / "out" / "train.py").read_text() == "print('checked')\n"


def test_unpack_verified_refuses_bad_digests_and_oversize_archives(tmp_path):
    data = _code(tmp_path, "x = 1\n")
    for bad in ("", "A" * 64, digest_of(data)[:63], digest_of(data) + "\n"):
        with pytest.raises(SnapshotError, match="not a sha256"):
            unpack_verified(io.BytesIO(data), bad, tmp_path / "out")
    with pytest.raises(SnapshotError, match="larger than"):
        unpack_verified(io.BytesIO(data), digest_of(data), tmp_path / "out", limit=len(data) - 1)
    assert not (tmp_path / "out").exists()


def test_a_matching_but_hostile_archive_is_still_checked_member_by_member(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    data = raw.getvalue()
    with pytest.raises(SnapshotError, match="leaves the tree"):
        unpack_verified(io.BytesIO(data), digest_of(data), tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()


def test_unpack_without_a_digest_still_works(tmp_path):
    data = _code(tmp_path, "y = 2\n")
    (tmp_path / "a.tar.gz").write_bytes(data)
    unpack(tmp_path / "a.tar.gz", tmp_path / "out")
    assert (tmp_path / "out" / "train.py").read_text() == "y = 2\n"
