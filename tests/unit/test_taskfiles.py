"""A task directory is the task's: whatever it plants there never makes the service read a file the task cannot.

Attacks are made from where a task stands: as its Unix account (``alice``, created by the test set-up
with useradd), in its own task directory, against a secret only root can read. Then the service's
readers (``taskfiles``, the log and outputs endpoints, run here as root) are asked for the file and
must refuse it without blocking and without a byte of the secret. Cases a task cannot make itself
on this kernel (a hard link to a root file with ``fs.protected_hardlinks=1``, a file of another uid)
are also planted as root, as a site without that protection (or another account) could.
"""

from __future__ import annotations

import io
import json
import os
import socket
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import tornado.httpclient
import tornado.httpserver

from tacc_hub.executors import taskfiles
from tacc_hub.executors.identity import Identity
from tacc_hub.executors.taskfiles import TaskFileError, TaskFileMissing
from tacc_hub.service import tasks as task_api
from tacc_hub.service.app import TaccHub
from tacc_hub.service.auth import new_token
from tacc_hub.store import NewTask, TaskStatus
from tests.accounts import ensure_accounts

SECRET = b"ROOT-ONLY-SECRET-7f3a\n"
OTHER_UID = 4242  # an account that is neither the task's nor the service's


@pytest.fixture(scope="session")
def alice() -> tuple[int, int]:
    import pwd

    ensure_accounts(("alice",))
    pw = pwd.getpwnam("alice")
    return pw.pw_uid, pw.pw_gid


def as_user(account: tuple[int, int], *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as the task's account (what a hostile task can do)."""
    return subprocess.run(list(argv), user=account[0], group=account[1], extra_groups=[], cwd=cwd,
                          capture_output=True, text=True, timeout=30)


@pytest.fixture
def layout(alice: tuple[int, int]) -> Iterator[tuple[Path, Path, Path]]:
    """(data_dir, a task dir owned by alice (0700) with a log, a root-only secret file (0600))."""
    base = Path(tempfile.mkdtemp(prefix="tacc-taskfiles-"))  # not pytest's tmp: alice must reach it
    base.chmod(0o711)
    tasks = base / "tasks"
    tasks.mkdir(mode=0o711)
    tasks.chmod(0o711)
    secret = base / "secret.txt"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    tdir = tasks / "7"
    tdir.mkdir()
    os.chown(tdir, *alice)
    tdir.chmod(0o700)
    r = as_user(alice, "sh", "-c", "printf 'hello from the task\\n' > output.log && mkdir -p work/out", cwd=tdir)
    assert r.returncode == 0, r.stderr
    assert as_user(alice, "cat", str(secret)).returncode != 0  # the premise: the task cannot read it
    yield base, tdir, secret
    subprocess.run(["rm", "-rf", str(base)], check=False)


def _read(tdir: Path, uid: int, rel: str = "output.log") -> bytes:
    """read_chunk in a thread: a read that blocks (a FIFO) fails the test instead of hanging it."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["data"] = taskfiles.read_chunk(tdir, rel, uid, 0, 1 << 20)
        except BaseException as exc:  # handed to the test thread
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "reading the task's file blocked"
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["data"]  # type: ignore[return-value]


# --- the reader -----------------------------------------------------------------------


def test_a_normal_log_is_read(layout, alice):
    _, tdir, _ = layout
    assert _read(tdir, alice[0]) == b"hello from the task\n"
    assert taskfiles.read_chunk(tdir, "output.log", alice[0], 6, 4) == b"from"
    assert taskfiles.read_chunk(tdir, "output.log", alice[0], 1000, 10) == b""
    with taskfiles.open_task_file(tdir, "output.log", alice[0]) as fh:
        assert fh.read() == b"hello from the task\n"


def test_a_missing_log_or_task_dir_reads_as_empty(layout, alice):
    base, tdir, _ = layout
    (tdir / "output.log").unlink()
    assert _read(tdir, alice[0]) == b""
    assert _read(base / "tasks" / "8", alice[0]) == b""


def test_symlink_to_a_root_only_file_as_the_log_is_refused(layout, alice):
    _, tdir, secret = layout
    r = as_user(alice, "ln", "-sf", str(secret), "output.log", cwd=tdir)
    assert r.returncode == 0, r.stderr
    with pytest.raises(TaskFileError, match="symbolic link") as exc:
        _read(tdir, alice[0])
    assert not isinstance(exc.value, TaskFileMissing)
    assert SECRET.decode().strip() not in str(exc.value)


def test_symlinked_directory_component_is_refused(layout, alice):
    _, tdir, secret = layout
    r = as_user(alice, "sh", "-c", f"rmdir work/out && ln -s {secret.parent} work/out && ln -s /etc work/etc",
                cwd=tdir)
    assert r.returncode == 0, r.stderr
    with pytest.raises(TaskFileError, match="symbolic link"):
        _read(tdir, alice[0], "work/out/secret.txt")
    with pytest.raises(TaskFileError, match="symbolic link"):
        _read(tdir, alice[0], "work/etc/passwd")
    # the whole work directory swapped for a link
    r = as_user(alice, "sh", "-c", f"rm -rf work && ln -s {secret.parent} work", cwd=tdir)
    assert r.returncode == 0, r.stderr
    with pytest.raises(TaskFileError, match="work is a symbolic link"):
        _read(tdir, alice[0], "work/secret.txt")


def test_hard_link_to_a_root_owned_file_is_refused(layout, alice):
    _, tdir, secret = layout
    (tdir / "output.log").unlink()
    # From the task: the kernel refuses it here (fs.protected_hardlinks); where it does not, the check below does.
    attempt = as_user(alice, "ln", str(secret), "output.log", cwd=tdir)
    if attempt.returncode != 0:
        os.link(secret, tdir / "output.log")  # what a task could do on a site without that protection
    assert (tdir / "output.log").stat().st_nlink == 2
    with pytest.raises(TaskFileError, match="owned by root"):
        _read(tdir, alice[0])


def test_fifo_as_the_log_is_refused_without_blocking(layout, alice):
    _, tdir, _ = layout
    r = as_user(alice, "sh", "-c", "rm output.log && mkfifo output.log", cwd=tdir)
    assert r.returncode == 0, r.stderr
    with pytest.raises(TaskFileError, match="FIFO"):
        _read(tdir, alice[0])


def test_fifo_swapped_in_after_the_check_is_refused_without_blocking(layout, alice, monkeypatch):
    """The race: a regular file at lstat time, a FIFO at open time. O_NONBLOCK + the fstat recheck hold."""
    _, tdir, _ = layout
    real_stat = os.stat

    def stat_then_swap(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        if path == "output.log":
            r = as_user(alice, "sh", "-c", "rm output.log && mkfifo output.log", cwd=tdir)
            assert r.returncode == 0, r.stderr
        return st

    monkeypatch.setattr(taskfiles.os, "stat", stat_then_swap)
    # "replaced" (another inode), or the FIFO seen by the fstat recheck when the freed inode number is reused
    with pytest.raises(TaskFileError, match=r"replaced|FIFO"):
        _read(tdir, alice[0])


def test_symlink_swapped_in_after_the_check_is_not_followed(layout, alice, monkeypatch):
    _, tdir, secret = layout
    real_stat = os.stat

    def stat_then_swap(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        if path == "output.log":
            r = as_user(alice, "ln", "-sf", str(secret), "output.log", cwd=tdir)
            assert r.returncode == 0, r.stderr
        return st

    monkeypatch.setattr(taskfiles.os, "stat", stat_then_swap)
    with pytest.raises(TaskFileError, match="replaced"):
        _read(tdir, alice[0])


def test_a_file_of_another_account_is_refused(layout, alice):
    _, tdir, _ = layout
    os.chown(tdir / "output.log", OTHER_UID, OTHER_UID)
    with pytest.raises(TaskFileError, match=f"uid {OTHER_UID}"):
        _read(tdir, alice[0])
    os.chown(tdir / "output.log", *alice)
    os.chown(tdir / "work", OTHER_UID, OTHER_UID)  # a directory on the way, too
    (tdir / "work" / "f").write_bytes(b"x")
    os.chown(tdir / "work" / "f", *alice)
    with pytest.raises(TaskFileError, match=f"uid {OTHER_UID}"):
        _read(tdir, alice[0], "work/f")


def test_devices_and_sockets_are_refused(layout, alice):
    _, tdir, _ = layout
    (tdir / "output.log").unlink()
    os.mknod(tdir / "output.log", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    os.chown(tdir / "output.log", *alice)
    with pytest.raises(TaskFileError, match="device"):
        _read(tdir, alice[0])
    (tdir / "output.log").unlink()
    r = as_user(alice, "python3", "-c", "import socket; socket.socket(socket.AF_UNIX).bind('output.log')", cwd=tdir)
    assert r.returncode == 0, r.stderr
    with pytest.raises(TaskFileError, match="socket"):
        _read(tdir, alice[0])


def test_the_task_dir_itself(layout, alice):
    base, tdir, secret = layout
    os.chown(tdir, OTHER_UID, OTHER_UID)  # another account's directory: refused
    with pytest.raises(TaskFileError, match="task directory is owned by uid 4242"):
        _read(tdir, alice[0])
    os.chown(tdir, 0, 0)  # still root's: the launcher has not handed it over yet
    assert _read(tdir, alice[0]) == b""
    os.chown(tdir, *alice)
    link = base / "tasks" / "9"
    link.symlink_to(secret.parent)
    with pytest.raises(TaskFileError, match="symbolic link"):
        _read(link, alice[0])


def test_a_parent_other_accounts_can_write_is_not_trusted(layout, alice):
    base, tdir, _ = layout
    (base / "tasks").chmod(0o1777)
    with pytest.raises(TaskFileError, match="writable by other accounts"):
        _read(tdir, alice[0])


@pytest.mark.parametrize("rel", ["../secret.txt", "/etc/passwd", "work/../../secret.txt"])
def test_paths_leaving_the_task_dir_are_refused(layout, alice, rel):
    _, tdir, _ = layout
    with pytest.raises(TaskFileError, match="not a path inside"):
        _read(tdir, alice[0], rel)


def test_expected_uid_follows_the_identity(alice):
    assert taskfiles.expected_uid(Identity(mode="service"), "alice") == os.geteuid()
    assert taskfiles.expected_uid(Identity(mode="owner"), "alice") == alice[0]
    # service identity with one site-wide job account (Slurm's submit_as): that account's files
    assert taskfiles.expected_uid(Identity(mode="service"), "bob", service_user="alice") == alice[0]
    with pytest.raises(TaskFileError, match="no Unix account"):
        taskfiles.expected_uid(Identity(mode="service"), "bob", service_user="nosuch-tacc-user")


# --- the outputs archive ----------------------------------------------------------------


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


def test_outputs_archive_holds_only_the_tasks_own_regular_files(layout, alice):
    _, tdir, secret = layout
    r = as_user(alice, "sh", "-c", " && ".join([
        "mkdir -p work/out/sub", "echo model > work/out/model.pt", "echo deep > work/out/sub/x.txt",
        f"ln -s {secret} work/out/leak", f"ln -s {secret.parent} work/out/dirleak", "ln -s model.pt work/out/latest",
        "mkfifo work/out/pipe", "echo top > work/single.txt", f"ln -s {secret} work/linked-output",
    ]), cwd=tdir)
    assert r.returncode == 0, r.stderr
    os.link(secret, tdir / "work" / "out" / "hard")  # root-planted: protected_hardlinks stops alice here
    (tdir / "work" / "out" / "other").write_bytes(b"not hers")
    os.chown(tdir / "work" / "out" / "other", OTHER_UID, OTHER_UID)
    buf = io.BytesIO()
    skipped = task_api._archive(buf, tdir, alice[0], ["out", "single.txt", "linked-output", "absent"])
    data = buf.getvalue()
    members = _members(data)
    assert set(members) == {"output.log", "outputs/out", "outputs/out/model.pt", "outputs/out/sub",
                            "outputs/out/sub/x.txt", "outputs/single.txt", task_api.SKIPPED_NAME}
    assert all(m.isreg() or m.isdir() for m in members.values())
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        everything = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isreg())  # type: ignore[union-attr]
        note = tar.extractfile(task_api.SKIPPED_NAME).read().decode()  # type: ignore[union-attr]
    assert SECRET not in everything and b"not hers" not in everything
    for name in ("outputs/out/leak", "outputs/out/dirleak", "outputs/out/latest", "outputs/out/pipe",
                 "outputs/out/hard", "outputs/out/other", "outputs/linked-output"):
        assert any(line.startswith(name + ":") for line in skipped), (name, skipped)
        assert name in note
    assert not any("absent" in line for line in skipped)


def test_outputs_archive_without_anything_refused_has_no_note(layout, alice):
    _, tdir, _ = layout
    r = as_user(alice, "sh", "-c", "echo w > work/out/w.bin", cwd=tdir)
    assert r.returncode == 0, r.stderr
    buf = io.BytesIO()
    assert task_api._archive(buf, tdir, alice[0], ["out"]) == []
    assert set(_members(buf.getvalue())) == {"output.log", "outputs/out", "outputs/out/w.bin"}


def test_outputs_through_a_linked_work_dir_are_refused(layout, alice):
    _, tdir, secret = layout
    r = as_user(alice, "sh", "-c", f"rm -rf work && ln -s {secret.parent} work", cwd=tdir)
    assert r.returncode == 0, r.stderr
    buf = io.BytesIO()
    skipped = task_api._archive(buf, tdir, alice[0], ["secret.txt", "."])
    assert set(_members(buf.getvalue())) == {"output.log", task_api.SKIPPED_NAME}
    assert len(skipped) == 2 and all("symbolic link" in line for line in skipped)


# --- through the API, as the service runs it ------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_api_logs_and_outputs_refuse_a_planted_link(alice, tmp_path):
    data_dir = Path(tempfile.mkdtemp(prefix="tacc-data-"))
    data_dir.chmod(0o711)
    secret = data_dir / "secret.txt"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    hub = TaccHub()
    hub.initialize([f"--TaccHub.state_dir={tmp_path / 'state'}", f"--TaccHub.data_dir={data_dir}",
                    "--TaccHub.task_identity=owner", "--TaccHub.config_file=/nonexistent.py"])
    ctx, app = hub.build()
    ctx.log_poll_interval = 0.05
    token = new_token(ctx.store, "alice")
    spec = {"name": "t", "entrypoint": {"argv": ["true"]}, "outputs": ["out"]}
    [rec] = ctx.store.insert_tasks([NewTask(owner="alice", name="t", digest="d" * 64, spec=spec, plan={},
                                            submitted_at=time.time(), status=TaskStatus.SUCCEEDED)])
    tdir = ctx.controller.executor.task_dir(rec.id)
    tdir.parent.mkdir(parents=True, exist_ok=True)
    tdir.mkdir(mode=0o700)
    os.chown(tdir, *alice)
    assert as_user(alice, "sh", "-c", "echo ok > output.log && mkdir -p work/out && echo m > work/out/m",
                   cwd=tdir).returncode == 0
    port = _free_port()
    server = tornado.httpserver.HTTPServer(app)
    server.listen(port, "127.0.0.1")
    client = tornado.httpclient.AsyncHTTPClient()

    async def get(path: str) -> tornado.httpclient.HTTPResponse:
        return await client.fetch(f"http://127.0.0.1:{port}{path}", raise_error=False, request_timeout=10,
                                  headers={"Authorization": f"token {token}"})

    try:
        resp = await get(f"/api/tasks/{rec.id}/logs")
        assert resp.code == 200 and json.loads(resp.body)["data"] == "ok\n"
        resp = await get(f"/api/tasks/{rec.id}/outputs")
        assert resp.code == 200 and set(_members(resp.body)) == {"output.log", "outputs/out", "outputs/out/m"}

        # the task replaces its log with a link to a root-only file, and its output with one to the directory
        assert as_user(alice, "sh", "-c", f"ln -sf {secret} output.log && rm -rf work/out && "
                                          f"ln -s {data_dir} work/out", cwd=tdir).returncode == 0
        resp = await get(f"/api/tasks/{rec.id}/logs")
        assert resp.code == 409, resp.body
        body = json.loads(resp.body)
        assert "output.log is a symbolic link" in body["message"] and SECRET not in resp.body
        resp = await get(f"/api/tasks/{rec.id}/logs/stream")
        assert resp.code == 200 and SECRET not in resp.body
        events = resp.body.decode()
        assert "event: error" in events and "event: end" in events and "symbolic link" in events
        resp = await get(f"/api/tasks/{rec.id}/outputs")
        assert resp.code == 200 and SECRET not in resp.body
        assert set(_members(resp.body)) == {task_api.SKIPPED_NAME}
    finally:
        server.stop()
        ctx.store.close()
        subprocess.run(["rm", "-rf", str(data_dir)], check=False)
