"""``/api/tasks/ID/exec``: a command or an interactive shell inside a running task, over a WebSocket.

Protocol (the Lab panel's Terminal and ``tcloud exec``/``tcloud shell`` speak it):

- client, first frame (text JSON): ``{"argv": [...], "tty": bool, "rows": int, "cols": int}``; ``argv``
  may be left out (or empty) with ``tty``: the account's login shell. Then binary frames are stdin;
  text frames ``{"resize": [rows, cols]}`` (tty) and ``{"eof": true}`` (closes stdin; a pipe only).
- server: binary frames, the first byte the channel (1 stdout, 2 stderr; a terminal is all 1), the
  rest data; last a text frame ``{"exit": CODE}`` (128+N when killed by signal N), then close. A
  session refused after the upgrade (a bad first frame, the command could not start) gets
  ``{"error": MESSAGE, "field": NAME | null}`` and a close with code 4400 (bad request), 4409 (the
  task is not running) or 4500 (the executor could not start it).

Before the upgrade, answered as JSON like the rest of the API: 401 without a valid token (or hub
cookie), 404 for a task that is not the caller's (admins reach every task), 409 when it is not
running, 429 past ``max_exec_sessions`` open sessions of the caller, 403 for a cross-origin upgrade
made with the hub's login cookie (cross-site WebSocket hijacking; a token header is not sent by a
browser on its own, so token clients may come from anywhere).

Invariants: the command is the executor's ``exec_argv`` (an argv list, run with asyncio's
subprocess exec: never a shell) with the launcher's scrubbed environment; every session is audited
(``exec``, or ``shell`` with a terminal) before it starts; the process is hung up (SIGHUP, SIGTERM,
then SIGKILL) when the socket closes, the task ends, or a shell sits idle ``exec_idle_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import struct
import termios
import time
from typing import Any, ClassVar

import tornado.web
import tornado.websocket

from tacc_hub.scheduler.cluster import Placement
from tacc_hub.schema import SpecError
from tacc_hub.schema.jsonsafe import load_json
from tacc_hub.store import TaskRecord

from . import requestid
from .auth import Denied, Identity
from .base import MAX_ID, ServiceContext

log = logging.getLogger("tacc_hub.exec")

MAX_ARGV_ITEMS = 4096
MAX_ARGV_BYTES = 256 * 1024
MAX_FIRST_FRAME = MAX_ARGV_BYTES * 2 + 4096  # JSON escapes may double the text
FIRST_FRAME_TIMEOUT_S = 30.0
CHECK_INTERVAL_S = 2.0  # how often a session checks its task still runs (and a shell's idle time)
HANGUP_GRACE_S = 2.0
TERM_GRACE_S = 10.0
READ_CHUNK = 65536
TERM_NAME = re.compile(r"[A-Za-z0-9._+-]{1,64}")

OPEN: dict[str, int] = {}  # user -> exec sessions open in this process
CLEANUPS: set[asyncio.Future[None]] = set()  # hang-ups still running after their socket closed


class ExecError(Exception):
    def __init__(self, message: str, field: str | None = None, code: int = 4400) -> None:
        super().__init__(message)
        self.message, self.field, self.code = message, field, code


def parse_start(data: str | bytes) -> tuple[list[str], bool, int, int]:
    """(argv, tty, rows, cols) of the first frame; ExecError naming the field otherwise."""
    if isinstance(data, bytes):
        raise ExecError("the first frame must be text: {\"argv\": [...], \"tty\": bool, \"rows\": N, \"cols\": N}")
    if len(data) > MAX_FIRST_FRAME:
        raise ExecError(f"the first frame is larger than {MAX_FIRST_FRAME} bytes", "argv")
    try:
        msg = load_json(data, "first frame")
    except SpecError as exc:
        raise ExecError(str(exc)[:500]) from None
    if not isinstance(msg, dict):
        raise ExecError("the first frame must be a JSON object")
    unknown = sorted(set(msg) - {"argv", "tty", "rows", "cols", "term"})
    if unknown:
        raise ExecError(f"unknown field {unknown[0][:64]!r}", unknown[0][:64])
    tty = msg.get("tty", False)
    if not isinstance(tty, bool):
        raise ExecError("tty must be true or false", "tty")
    argv = msg.get("argv", [])
    if argv is None:
        argv = []
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ExecError("argv must be a list of strings", "argv")
    if len(argv) > MAX_ARGV_ITEMS:
        raise ExecError(f"argv has more than {MAX_ARGV_ITEMS} items", "argv")
    if any("\0" in a for a in argv):
        raise ExecError("argv items may not hold NUL characters", "argv")
    if sum(len(a.encode("utf-8", "surrogatepass")) + 1 for a in argv) > MAX_ARGV_BYTES:
        raise ExecError(f"argv is longer than {MAX_ARGV_BYTES} bytes", "argv")
    if not argv and not tty:
        raise ExecError("argv must name a command (only a terminal session may leave it out: the login shell)",
                        "argv")
    if argv and argv[0] == "":
        raise ExecError("argv[0] may not be empty", "argv")
    rows, cols = _size(msg.get("rows", 24), "rows"), _size(msg.get("cols", 80), "cols")
    return argv, tty, rows, cols


def _size(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10000:
        raise ExecError(f"{field} must be a whole number in 1..10000", field)
    return value


def set_winsize(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _exit_code(rc: int | None) -> int:
    if rc is None:
        return 255
    return 128 - rc if rc < 0 else rc


class ExecSocket(tornado.websocket.WebSocketHandler):
    """One exec or shell session of one task (see the module's docstring)."""

    openapi: ClassVar[dict[str, dict[str, Any]]] = {"get": {
        "summary": "WebSocket: run a command (or, with a terminal, a shell) inside a running task. First frame "
                   "{argv, tty, rows, cols}; binary frames stdin; {resize: [rows, cols]}, {eof: true}; the server "
                   "sends binary frames (channel byte 1 stdout / 2 stderr, then data) and last {exit: CODE}.",
        "status": 101,
        "errors": {"403": "a cross-origin upgrade with the hub's login cookie", "409": "the task is not running",
                   "429": "too many exec sessions open (max_exec_sessions)"},
    }}
    public: ClassVar[bool] = False

    ctx: ServiceContext
    identity: Identity
    request_id: str | None = None  # this upgrade's id (requestid), on its audit rows and log lines

    def initialize(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.task: TaskRecord | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self.master: int | None = None
        self.counted = False
        self.started = False
        self.closed = False
        self.last_activity = time.monotonic()
        self.tty = False
        self.tasks: list[asyncio.Task[Any]] = []

    # --- before the upgrade ------------------------------------------------------------

    def _refuse(self, status: int, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps({"status": status, "message": message, "errors": []}))

    async def get(self, *args: Any, **kwargs: Any) -> None:
        task_id = str(args[0]) if args else ""
        self.request_id = requestid.from_header(self.request.headers.get(requestid.HEADER))
        requestid.REQUEST_ID.set(self.request_id)  # the session's log lines (its coroutines inherit it)
        self.set_header(requestid.HEADER, self.request_id)
        try:
            self.identity = await self.ctx.auth.authenticate(self)
        except Denied as exc:
            return self._refuse(exc.status, exc.message)
        user, admin = self.identity.user, self.identity.admin
        tid = int(task_id) if task_id.isascii() and task_id.isdigit() and len(task_id) <= 18 else 0
        rec = self.ctx.store.get(tid) if 0 < tid <= MAX_ID else None
        if rec is None or (rec.owner != user and not admin):
            return self._refuse(404, f"no task {task_id[:32]!r}")
        if rec.status.value != "running":
            return self._refuse(409, f"task {tid} is {rec.status.value}, not running: there is nothing to exec in")
        limit = self.ctx.running.max_exec_sessions
        if OPEN.get(user, 0) >= limit:
            return self._refuse(429, f"you have {limit} exec sessions open already (max_exec_sessions)")
        self.task = rec
        await super().get(*args, **kwargs)

    def check_origin(self, origin: str) -> bool:
        """A browser sends the hub's cookie to any site's upgrade: then Origin must be this host. A token header
        comes only from a program that was given the token."""
        if self.identity.via != "hub-cookie":
            return True
        return super().check_origin(origin)

    # --- the session -------------------------------------------------------------------

    def open(self, *args: str, **kwargs: str) -> None:
        user = self.identity.user
        OPEN[user] = OPEN.get(user, 0) + 1
        self.counted = True
        if OPEN[user] > self.ctx.running.max_exec_sessions:  # another upgrade got there first
            self._fail(ExecError("too many exec sessions open (max_exec_sessions)", None, 4429))
            return
        self.tasks.append(asyncio.ensure_future(self._first_frame_deadline()))

    async def _first_frame_deadline(self) -> None:
        await asyncio.sleep(FIRST_FRAME_TIMEOUT_S)
        if not self.started and not self.closed:
            self._fail(ExecError(f"no first frame within {FIRST_FRAME_TIMEOUT_S:g} s"))

    def _fail(self, exc: ExecError) -> None:
        if self.closed:
            return
        with contextlib.suppress(tornado.websocket.WebSocketClosedError):
            self.write_message(json.dumps({"error": exc.message, "field": exc.field}))
        self.close(exc.code, exc.message.encode()[:120].decode(errors="ignore"))  # a close reason: <= 123 bytes

    async def on_message(self, message: str | bytes) -> None:
        # tornado reads the next frame only once this returns: nothing arrives while the command starts
        if self.closed:
            return
        self.last_activity = time.monotonic()
        if self.started:
            await self._input(message)
            return
        try:
            await self._start(message)
        except ExecError as exc:
            self._fail(exc)

    async def _input(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            await self._write_stdin(message)
            return
        try:
            msg = json.loads(message)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if "resize" in msg and self.master is not None:
            size = msg["resize"]
            if isinstance(size, list) and len(size) == 2:
                try:
                    rows, cols = _size(size[0], "rows"), _size(size[1], "cols")
                except ExecError:
                    return
                with contextlib.suppress(OSError):
                    set_winsize(self.master, rows, cols)
        if msg.get("eof") is True and self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                self.proc.stdin.close()

    async def _write_stdin(self, data: bytes) -> None:
        if self.master is not None:
            view = memoryview(data)
            while view and not self.closed:
                try:
                    n = os.write(self.master, view)
                    view = view[n:]
                except BlockingIOError:
                    await asyncio.sleep(0.01)
                except OSError:
                    return
            return
        proc = self.proc
        if proc is not None and proc.stdin is not None and not proc.stdin.is_closing():
            try:
                proc.stdin.write(data)
                await proc.stdin.drain()
            except (ConnectionError, OSError, RuntimeError):
                pass

    async def _start(self, first: str | bytes) -> None:
        argv, tty, rows, cols = parse_start(first)
        rec = self.ctx.store.get(self.task.id) if self.task else None
        if rec is None or rec.status.value != "running":
            raise ExecError("the task is not running", None, 4409)
        self.task, self.tty = rec, tty
        executor = self.ctx.controller.executor
        state = dict(rec.executor_state or {})
        from pydantic import ValidationError

        from tacc_hub.executors.base import LaunchError

        try:
            placement = Placement.model_validate(rec.placement) if rec.placement else None
            cmd = await asyncio.to_thread(executor.exec_argv, rec.id, state, placement, argv, tty=tty)
        except ValidationError:
            raise ExecError("the task's placement is unreadable: it cannot be reached", None, 4500) from None
        except LaunchError as exc:
            raise ExecError(str(exc)[:2000], None, 4500) from None
        if self.closed:  # the client left while the command was being prepared: start nothing
            return
        node = min((n.node for n in placement.nodes), key=_natural) if placement and placement.nodes else None
        self.ctx.store.add_audit(self.identity.user, "shell" if tty else "exec", rec.id,
                                 {"argv": argv, "tty": tty, "node": node}, target=f"task:{rec.id}",
                                 request_id=self.request_id)
        env = self._env(executor, tty)
        try:
            if tty:
                master, slave = os.openpty()
                try:
                    set_winsize(slave, rows, cols)
                    os.set_blocking(master, False)
                    # The terminal must be the controlling one of whoever handles resizes (SIGWINCH): the launcher
                    # gives it to its command itself; srun must have it: setsid -c (no fork: not a group leader).
                    setsid = None if executor.name == "local" else shutil.which("setsid", path=env.get("PATH"))
                    proc = await asyncio.create_subprocess_exec(
                        *([setsid, "-c"] if setsid else []), *cmd, stdin=slave, stdout=slave, stderr=slave,
                        env=env, start_new_session=setsid is None)
                except BaseException:
                    os.close(master)
                    raise
                finally:
                    os.close(slave)
            else:
                master = None
                proc = await asyncio.create_subprocess_exec(
                    *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True)
        except OSError as exc:
            raise ExecError(f"the command could not be started: {exc}", None, 4500) from None
        self.proc, self.master, self.started = proc, master, True
        if self.closed:  # the client left while it started: on_close found nothing to hang up
            await self._cleanup()
            return
        if master is not None:
            self._pty_done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().add_reader(master, self._pty_readable)
        log.info("exec: %s in task %d (%s): %s", self.identity.user, rec.id, "tty" if tty else "pipes",
                 json.dumps(argv)[:500])
        self.tasks.append(asyncio.ensure_future(self._run()))

    @staticmethod
    def _env(executor: Any, tty: bool) -> dict[str, str]:
        """What the launcher (local) or srun (Slurm) starts with: the executor's scrubbed environment."""
        own = getattr(executor, "_env", None)
        if callable(own):
            env = dict(own())
        else:
            from tacc_hub.executors.local import launcher_env

            env = launcher_env()
        if tty:
            term = os.environ.get("TERM", "")
            env["TERM"] = term if TERM_NAME.fullmatch(term) and term != "dumb" else "xterm-256color"
        return env

    def _pty_readable(self) -> None:
        assert self.master is not None
        try:
            data = os.read(self.master, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:  # EIO: every process holding the terminal is gone
            data = b""
        loop = asyncio.get_running_loop()
        if not data:
            loop.remove_reader(self.master)
            if not self._pty_done.done():
                self._pty_done.set_result(None)
            return
        sent = self._send(1, data)
        if sent is not None and not sent.done():  # back-pressure: read the terminal again once this went out
            loop.remove_reader(self.master)
            sent.add_done_callback(self._resume_pty)

    def _resume_pty(self, sent: asyncio.Future[None]) -> None:
        if not sent.cancelled() and sent.exception() is not None:
            return  # the socket closed: the session is ending
        if self.master is not None and not self.closed:
            asyncio.get_running_loop().add_reader(self.master, self._pty_readable)

    def _send(self, channel: int, data: bytes) -> asyncio.Future[None] | None:
        self.last_activity = time.monotonic()
        if self.closed:
            return None
        try:
            return self.write_message(bytes([channel]) + data, binary=True)
        except tornado.websocket.WebSocketClosedError:
            return None

    async def _pump(self, stream: asyncio.StreamReader | None, channel: int) -> None:
        if stream is None:
            return
        while True:
            data = await stream.read(READ_CHUNK)
            if not data:
                return
            self.last_activity = time.monotonic()
            if self.closed:
                return
            try:  # waiting for the frame to be sent: a slow client slows the command down, not our memory
                await self.write_message(bytes([channel]) + data, binary=True)
            except tornado.websocket.WebSocketClosedError:
                return

    async def _run(self) -> None:
        proc = self.proc
        assert proc is not None
        watch = asyncio.ensure_future(self._watch())
        try:
            if self.master is not None:
                await proc.wait()
                with contextlib.suppress(TimeoutError):  # what is still in the terminal's buffer
                    await asyncio.wait_for(asyncio.shield(self._pty_done), 1.0)
            else:
                await asyncio.gather(self._pump(proc.stdout, 1), self._pump(proc.stderr, 2))
                await proc.wait()
        finally:
            watch.cancel()
        if not self.closed:
            with contextlib.suppress(tornado.websocket.WebSocketClosedError):
                self.write_message(json.dumps({"exit": _exit_code(proc.returncode)}))
            self.close(1000)

    async def _watch(self) -> None:
        """Ends the session when its task ends, or when a shell sat idle too long."""
        idle = self.ctx.running.exec_idle_timeout
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            rec = self.ctx.store.get(self.task.id) if self.task else None
            if rec is None or rec.status.value != "running":
                await self._hang_up()
                return
            if self.tty and idle > 0 and time.monotonic() - self.last_activity > idle:
                self._send(1, f"\r\ntacc: closing this shell after {idle:g} s without input or output\r\n".encode())
                await self._hang_up()
                return

    async def _hang_up(self) -> None:
        """SIGHUP, then SIGTERM, then SIGKILL to the command (the launcher passes them on to its process group)."""
        proc = self.proc
        if proc is None:
            return
        # the launcher kills everything of the command 1 s after SIGTERM (srun: its step); SIGKILL is the last resort
        for sig, grace in ((signal.SIGHUP, HANGUP_GRACE_S), (signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 5.0)):
            if proc.returncode is not None:
                return
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), grace)

    def on_close(self) -> None:
        self.closed = True
        if self.counted:
            self.counted = False
            user = self.identity.user
            OPEN[user] = OPEN.get(user, 1) - 1
            if OPEN[user] <= 0:
                OPEN.pop(user, None)
        for t in self.tasks[:1]:
            t.cancel()  # the first-frame deadline
        cleanup = asyncio.ensure_future(self._cleanup())
        CLEANUPS.add(cleanup)
        cleanup.add_done_callback(CLEANUPS.discard)

    async def _cleanup(self) -> None:
        await self._hang_up()
        if self.master is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self.master)
            with contextlib.suppress(OSError):
                os.close(self.master)
            self.master = None

    def _request_summary(self) -> str:
        return f"{self.request.method} {self.request.path} ({self.request.remote_ip})"

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, tornado.web.HTTPError):
            return
        super().log_exception(typ, value, tb)


ROUTES: list[tuple[str, Any]] = [
    (r"/api/tasks/(\d+)/exec", ExecSocket),
]
