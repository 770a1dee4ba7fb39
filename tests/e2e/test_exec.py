"""exec and shell into a running task, through the real service (local executor, 2 fake GPU slots) and tcloud.

The tasks run as their owners' Unix accounts; ``tcloud shell`` is driven through a real PTY. The attacks
come from where an attacker stands: another user's token, a foreign web page's cookie-carrying upgrade,
an ended task, hostile argv.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import select
import signal
import struct
import tempfile
import termios
import time
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from tacc_hub.snapshot import digest_of, pack

from .conftest import BIN, ROOT, Api, ServiceProcess, tcloud, write_task

WAIT_S = 30


def _submit(service: ServiceProcess, user: str, d: Path) -> int:
    res = tcloud(service, user, "submit", str(d), "--json")
    assert res.returncode == 0, res.stderr
    return int(json.loads(res.stdout)["id"])


def _running_task(service: ServiceProcess, tmp_path: Path, user: str = "alice", gpus: int = 0,
                  name: str = "sleeper") -> int:
    yaml = (f"name: {name}\ncode: .\nworkdir: sub\nentrypoint:\n  - echo $$ > pid\n"
            "  - echo \"$CUDA_VISIBLE_DEVICES\" > cuda\n  - sleep 600\n")
    if gpus:
        yaml += f"resources: {{gpus_per_node: {gpus}}}\n"
    yaml += "environment:\n  variables: {MY_VAR: \"a b,c'$(id)\"}\n"
    d = write_task(tmp_path / f"{name}-{user}", yaml)
    (d / "sub").mkdir(exist_ok=True)
    (d / "sub" / "keep").write_text("x\n")
    tid = _submit(service, user, d)
    Api(service.url, service.token(user)).wait_status(tid, {"running"})
    return tid


def _cancel(service: ServiceProcess, user: str, tid: int) -> None:
    tcloud(service, user, "cancel", str(tid))
    Api(service.url, service.token(user)).wait_status(tid, {"cancelled", "failed", "succeeded"}, timeout=30)


def _exec(service: ServiceProcess, user: str, tid: int, *argv: str, stdin: bytes = b""):
    import subprocess

    env = {**os.environ, "TACC_URL": service.url, "TACC_TOKEN": service.token(user), "TACC_CONFIG": "/nonexistent"}
    return subprocess.run([str(BIN / "tcloud"), "exec", str(tid), "--", *argv], input=stdin, capture_output=True,
                          env=env, cwd=ROOT, timeout=60)


def _wait(cond, what: str, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def alice_task(service: ServiceProcess, tmp_path: Path):
    tid = _running_task(service, tmp_path, gpus=1)
    yield tid
    _cancel(service, "alice", tid)


def test_exec_runs_as_the_owner_in_the_task(service, alice_task):
    tid = alice_task
    workdir = service.data_dir / "tasks" / str(tid) / "work"
    res = _exec(service, "alice", tid, "whoami")
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().strip() == "alice"
    res = _exec(service, "alice", tid, "pwd")
    assert res.stdout.decode().strip() == str(workdir / "sub")
    cuda = _wait(lambda: (workdir / "sub" / "cuda").read_text().strip() if (workdir / "sub" / "cuda").exists()
                 else "", "the task's CUDA_VISIBLE_DEVICES")
    res = _exec(service, "alice", tid, "sh", "-c", "echo $CUDA_VISIBLE_DEVICES; echo $TACC_TASK_ID")
    assert res.stdout.decode().split() == [cuda, str(tid)]
    res = _exec(service, "alice", tid, "printenv", "MY_VAR")  # the task's own variables (its launch.sh exports)
    assert res.stdout == b"a b,c'$(id)\n"
    # exit codes and stderr come back on their own streams
    res = _exec(service, "alice", tid, "sh", "-c", "echo out; echo err >&2; exit 7")
    assert (res.returncode, res.stdout, res.stderr) == (7, b"out\n", b"err\n")
    # stdin is forwarded, its end too
    res = _exec(service, "alice", tid, "tr", "a-z", "A-Z", stdin=b"hello\n")
    assert (res.returncode, res.stdout) == (0, b"HELLO\n")
    res = _exec(service, "alice", tid, "no-such-command-here")
    assert res.returncode == 127


def test_hostile_argv_arrives_literally(service, alice_task, tmp_path):
    tid = alice_task
    hostile = ["$(id)", ";rm -rf ~", "`touch /tmp/pwned-exec`", "a b", "'\"", "--", "FOO=bar", "\\n"]
    res = _exec(service, "alice", tid, "printf", "%s\\n", *hostile)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().split("\n")[:-1] == hostile
    assert not Path("/tmp/pwned-exec").exists()
    res = _exec(service, "alice", tid, "FOO=bar", "id")  # a NAME=VALUE first item is a command, not env
    assert res.returncode == 127


def _ws(service: ServiceProcess, tid: int, headers: dict[str, str]):
    async def go():
        req = HTTPRequest(f"ws://127.0.0.1:{service.port}/api/tasks/{tid}/exec", headers=headers)
        try:
            conn = await websocket_connect(req)
        except HTTPClientError as exc:
            return exc.code, json.loads(exc.response.body) if exc.response is not None and exc.response.body else {}
        conn.close()
        return 101, {}
    return asyncio.run(go())


def test_another_users_token_gets_404_and_nothing_runs(service, alice_task):
    tid = alice_task
    marker = Path(f"/tmp/exec-bob-{os.getpid()}-{time.time_ns()}")
    res = _exec(service, "bob", tid, "touch", str(marker))
    assert res.returncode == 255 and b"404" in res.stderr
    status, body = _ws(service, tid, {"Authorization": f"token {service.token('bob')}"})
    assert status == 404 and "no task" in body["message"]
    status, _ = _ws(service, tid, {})
    assert status == 401
    status, _ = _ws(service, 99999, {"Authorization": f"token {service.token('alice')}"})
    assert status == 404
    assert not marker.exists()
    # an admin may (and it is audited)
    res = _exec_admin(service, tid)
    assert res.returncode == 0 and res.stdout.decode().strip() == "alice"


def _exec_admin(service: ServiceProcess, tid: int):
    import subprocess

    env = {**os.environ, "TACC_URL": service.url, "TACC_TOKEN": service.token("root", admin=True),
           "TACC_CONFIG": "/nonexistent"}
    return subprocess.run([str(BIN / "tcloud"), "exec", "-n", str(tid), "--", "whoami"], capture_output=True,
                          env=env, cwd=ROOT, timeout=60)


def test_exec_after_the_task_ended_is_refused(service, tmp_path):
    tid = _running_task(service, tmp_path, name="ended")
    _cancel(service, "alice", tid)
    status, body = _ws(service, tid, {"Authorization": f"token {service.token('alice')}"})
    assert status == 409 and "not running" in body["message"]
    res = _exec(service, "alice", tid, "true")
    assert res.returncode == 255 and b"409" in res.stderr


def test_an_exec_ends_with_its_task(service, tmp_path):
    import subprocess

    tid = _running_task(service, tmp_path, name="ending")
    env = {**os.environ, "TACC_URL": service.url, "TACC_TOKEN": service.token("alice"), "TACC_CONFIG": "/nonexistent"}
    proc = subprocess.Popen([str(BIN / "tcloud"), "exec", "-n", str(tid), "--", "sh", "-c",
                             "echo $$; (setsid sleep 600 & echo $!); exec sleep 500"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    assert proc.stdout is not None
    pids = [int(proc.stdout.readline()), int(proc.stdout.readline())]
    assert all(_alive(p) for p in pids)
    _cancel(service, "alice", tid)
    _wait(lambda: not any(_alive(p) for p in pids), "the exec's processes (a setsid one too) to be gone")
    assert proc.wait(30) != 0


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal:
    """tcloud on a real PTY: what it prints, what we type."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(ROOT)
            os.execve(argv[0], argv, env)
        _set_size(self.fd, 30, 100)
        self.out = b""

    def read_until(self, needle: bytes, timeout: float = WAIT_S) -> bytes:
        deadline = time.monotonic() + timeout
        while needle not in self.out:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {needle!r} in {self.out[-2000:]!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"terminal closed; no {needle!r} in {self.out[-2000:]!r}")
                self.out += chunk
        return self.out

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = WAIT_S) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with_pid, status = os.waitpid(self.pid, os.WNOHANG)
            if with_pid:
                self.final_lflag = termios.tcgetattr(self.fd)[3]  # the terminal's mode as tcloud left it
                try:
                    while os.read(self.fd, 65536):
                        pass
                except OSError:
                    pass
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("tcloud shell did not exit")


def test_shell_on_a_real_terminal(service, alice_task):
    tid = alice_task
    env = {**os.environ, "TACC_URL": service.url, "TACC_TOKEN": service.token("alice"), "TACC_CONFIG": "/nonexistent",
           "TERM": "xterm"}
    term = Terminal([str(BIN / "tcloud"), "shell", str(tid)], env)
    term.read_until(b"work/sub$ ")  # the prompt of the account's login shell, in the task's working directory
    term.send("echo who=$(whoami)\n")
    term.read_until(b"who=alice")
    term.send("stty size\n")
    term.read_until(b"30 100")
    _set_size(term.fd, 41, 132)
    os.kill(term.pid, signal.SIGWINCH)
    deadline = time.monotonic() + WAIT_S
    while b"41 132" not in term.out:  # the resize travels on its own frame: ask until it has arrived
        assert time.monotonic() < deadline, term.out[-500:]
        term.send("stty size\n")
        term.read_until(b"\n")
        time.sleep(0.1)
        try:
            term.read_until(b"41 132", timeout=0.5)
        except AssertionError:
            pass
    term.send("exit 3\n")
    assert term.wait() == 3
    # tcloud put our terminal back in its cooked mode (line editing and echo) on the way out
    assert term.final_lflag & termios.ICANON and term.final_lflag & termios.ECHO


def test_sessions_are_audited(service, alice_task):
    tid = alice_task
    before = _audit(service, tid)
    assert _exec(service, "alice", tid, "true").returncode == 0
    rows = _wait(lambda: [r for r in _audit(service, tid) if r not in before], "an audit row")
    assert rows[0]["actor"] == "alice" and rows[0]["action"] == "exec"
    assert rows[0]["detail"]["argv"] == ["true"] and rows[0]["detail"]["tty"] is False


def _audit(service: ServiceProcess, tid: int) -> list[dict]:
    from tacc_hub.store import Store

    store = Store(f"sqlite:///{service.state_dir.resolve() / 'tacc.sqlite'}")
    try:
        return [{"actor": e.actor, "action": e.action, "detail": e.detail} for e in store.audit(task_id=tid)]
    finally:
        store.close()


async def _session(url: str, headers: dict[str, str], first: dict) -> tuple[object, list]:
    """A raw protocol session: the connection and a list collecting what the server sends."""
    conn = await websocket_connect(HTTPRequest(url, headers=headers))
    await conn.write_message(json.dumps(first))
    return conn, []


async def _collect(conn) -> tuple[bytes, int | None]:
    out, code = b"", None
    while (msg := await conn.read_message()) is not None:
        if isinstance(msg, bytes):
            out += msg[1:]
        elif "exit" in json.loads(msg):
            code = json.loads(msg)["exit"]
    return out, code


def test_sessions_per_user_are_capped(service, alice_task):
    tid = alice_task
    url = f"ws://127.0.0.1:{service.port}/api/tasks/{tid}/exec"
    headers = {"Authorization": f"token {service.token('alice')}"}

    async def go():
        conns = [(await _session(url, headers, {"argv": ["sleep", "120"]}))[0] for _ in range(4)]  # the default cap
        try:
            with pytest.raises(HTTPClientError) as exc:
                await websocket_connect(HTTPRequest(url, headers=headers))
            assert exc.value.code == 429
        finally:
            for c in conns:
                c.close()
        # closing them frees the slots (the service notices the close on its own time)
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                conn, _ = await _session(url, headers, {"argv": ["echo", "again"]})
                return await _collect(conn)
            except HTTPClientError as e:
                assert e.code == 429 and time.monotonic() < deadline
                await asyncio.sleep(0.1)

    assert asyncio.run(go()) == (b"again\n", 0)


def test_a_bad_first_frame_is_refused_naming_the_field(service, alice_task):
    tid = alice_task
    url = f"ws://127.0.0.1:{service.port}/api/tasks/{tid}/exec"
    headers = {"Authorization": f"token {service.token('alice')}"}

    async def first(frame: object) -> dict:
        conn = await websocket_connect(HTTPRequest(url, headers=headers))
        await conn.write_message(frame if isinstance(frame, str) else json.dumps(frame))
        msgs = []
        while (msg := await conn.read_message()) is not None:
            msgs.append(msg)
        assert conn.close_code == 4400, (conn.close_code, msgs)
        return json.loads(msgs[-1])

    async def go():
        assert (await first({"argv": "id"}))["field"] == "argv"
        assert (await first({"argv": ["a\0b"]}))["field"] == "argv"
        assert (await first({"argv": ["x"] * 5000}))["field"] == "argv"
        assert (await first({"argv": ["x" * 200_000, "y" * 100_000]}))["field"] == "argv"
        assert (await first({"argv": []}))["field"] == "argv"  # only a terminal may ask for the login shell
        assert (await first({"argv": ["id"], "tty": "yes"}))["field"] == "tty"
        assert (await first({"argv": ["id"], "tty": True, "rows": -1}))["field"] == "rows"
        assert (await first({"argv": ["id"], "env": {"LD_PRELOAD": "x"}}))["field"] == "env"
        assert (await first("{not json"))["field"] is None

    asyncio.run(go())
    assert all(r["detail"]["argv"] != ["a\0b"] for r in _audit(service, tid))  # nothing refused was started


def test_a_cross_origin_upgrade_with_the_hub_cookie_is_refused(tmp_path_factory):
    """A page on another site opening the WebSocket: the browser sends the hub's cookie, and its own Origin."""
    import requests

    from tests.hub.conftest import HubProcess

    hub = HubProcess(tmp_path_factory.mktemp("hub-exec")).start()
    try:
        s = hub.login("alice")
        assert s.get(hub.service_url + "/", timeout=30).status_code == 200  # the service's OAuth cookie
        token = hub.token("alice", ["custom:tacc:tasks"])
        with tempfile.TemporaryDirectory() as empty:
            archive = pack(empty)
        digest = digest_of(archive)
        auth = {"Authorization": f"token {token}"}
        requests.put(f"{hub.service_url}/api/code/{digest}", data=archive, headers=auth, timeout=30)
        r = requests.post(f"{hub.service_url}/api/tasks", headers=auth, timeout=30, json={
            "name": "xo", "entrypoint": "sleep 300", "resources": {"time_limit": "5m"},
            "code": {"kind": "snapshot", "digest": digest, "size": len(archive)}})
        assert r.status_code == 201, r.text
        tid = int(r.json()["id"])
        deadline = time.monotonic() + 60
        while requests.get(f"{hub.service_url}/api/tasks/{tid}", headers=auth, timeout=30).json()["status"] \
                != "running":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        cookie = "; ".join(f"{c.name}={c.value}" for c in s.cookies)
        url = hub.service_url.replace("http://", "ws://") + f"/api/tasks/{tid}/exec"
        marker = Path(f"/tmp/exec-xo-{os.getpid()}-{time.time_ns()}")

        async def attempt(origin: str) -> tuple[int, bytes, int | None]:
            try:
                conn = await websocket_connect(HTTPRequest(url, headers={"Cookie": cookie, "Origin": origin}))
            except HTTPClientError as exc:
                return exc.code, b"", None
            await conn.write_message(json.dumps({"argv": ["sh", "-c", f"touch {marker}; whoami"]}))
            out, code = await _collect(conn)
            return 101, out, code

        assert asyncio.run(attempt("http://evil.example"))[0] == 403
        assert not marker.exists()
        # the same cookie from the service's own pages (the same origin) is let in
        assert asyncio.run(attempt(hub.url)) == (101, b"alice\n", 0)
        assert marker.exists()
        marker.unlink()
        requests.post(f"{hub.service_url}/api/tasks/{tid}/cancel", headers=auth, timeout=30)
    finally:
        hub.stop()


def test_an_idle_shell_is_closed(tmp_path_factory, tmp_path):
    """Its own service: one whose shells may sit idle 2 s (exec_idle_timeout); a command without a terminal may."""
    svc = ServiceProcess(tmp_path_factory.mktemp("svc-idle"), "--TaccHub.exec_idle_timeout=2",
                         "--TaccHub.grace_period=1").start()
    try:
        tid = _running_task(svc, tmp_path, name="idle")
        env = {**os.environ, "TACC_URL": svc.url, "TACC_TOKEN": svc.token("alice"), "TACC_CONFIG": "/nonexistent",
               "TERM": "xterm"}
        term = Terminal([str(BIN / "tcloud"), "shell", str(tid)], env)
        term.read_until(b"without input or output")
        assert term.wait() != 0
        # a quiet command on pipes is not a shell: it runs to its end
        res = _exec(svc, "alice", tid, "sh", "-c", "sleep 5; echo done")
        assert (res.returncode, res.stdout) == (0, b"done\n")
        _cancel(svc, "alice", tid)
    finally:
        svc.stop()


def test_closing_the_socket_ends_the_command_even_one_that_ignores_hangups(service, alice_task):
    tid = alice_task
    url = f"ws://127.0.0.1:{service.port}/api/tasks/{tid}/exec"
    headers = {"Authorization": f"token {service.token('alice')}"}

    async def start(argv: list[str], tty: bool) -> int:
        conn, _ = await _session(url, headers, {"argv": argv, "tty": tty})
        out = b""
        while b"\n" not in out:
            msg = await conn.read_message()
            assert isinstance(msg, bytes), msg
            out += msg[1:]
        conn.close()
        return int(out.split()[0])

    stubborn = ["sh", "-c", "trap '' HUP TERM INT; echo $$; while :; do sleep 0.2; done"]
    pids = [asyncio.run(start(["sh", "-c", "echo $$; exec sleep 300"], False)),
            asyncio.run(start(stubborn, False)), asyncio.run(start(stubborn, True))]
    _wait(lambda: not any(_alive(p) for p in pids), "every command of a closed session to be gone")
