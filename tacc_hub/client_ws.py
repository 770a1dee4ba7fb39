"""A small WebSocket client for ``tcloud exec`` and ``tcloud shell`` (the ``api/tasks/ID/exec`` protocol).

It connects with the ``Authorization`` header (never a token in the URL), sends the first frame
(``{"argv", "tty", "rows", "cols"}``), forwards local stdin as binary frames (``{"eof": true}`` at its
end), writes channel 1 to stdout and channel 2 to stderr, and returns the command's exit code from
the last frame (``{"exit": CODE}``). With a terminal on both ends, the local one is put in raw mode
(restored on every way out) and its size follows ``SIGWINCH`` (``{"resize": [rows, cols]}``).

Exit code 255: the session failed (refused, the connection broke) - the reason on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from typing import Any, BinaryIO
from urllib.parse import urlsplit, urlunsplit

SESSION_FAILED = 255
MAX_MESSAGE = 16 * 1024 * 1024


class ExecFailed(Exception):
    """The session could not run; ``str()`` is the reason."""


def exec_url(base_url: str, task_id: int) -> str:
    """``ws(s)://HOST/PREFIX/api/tasks/ID/exec`` of the service at ``base_url`` (http or https)."""
    parts = urlsplit(base_url.rstrip("/"))
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ExecFailed(f"not an http(s) URL: {base_url!r}")
    return urlunsplit((scheme, parts.netloc, f"{parts.path}/api/tasks/{int(task_id)}/exec", "", ""))


def _refusal(exc: Exception) -> str:
    """The service's message of a refused upgrade (its JSON body), else the error itself."""
    response = getattr(exc, "response", None)
    body = getattr(response, "body", None)
    code = getattr(exc, "code", None)
    if body:
        with contextlib.suppress(ValueError, AttributeError):
            msg = json.loads(body).get("message")
            if msg:
                return f"{msg} (HTTP {code})"
    return str(exc)


def _terminal_size(fd: int) -> tuple[int, int]:
    try:
        size = os.get_terminal_size(fd)
        return max(1, size.lines), max(1, size.columns)
    except OSError:
        return 24, 80


class _StdinReader:
    """Local stdin in a thread (a regular file cannot be watched by the event loop): chunks, then None."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | None]) -> None:
        self.fd, self.loop, self.queue = fd, loop, queue
        threading.Thread(target=self._run, daemon=True, name="stdin").start()

    def _run(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            self.loop.call_soon_threadsafe(self.queue.put_nowait, data or None)
            if not data:
                return


async def run_session(base_url: str, headers: dict[str, str], task_id: int, argv: list[str], *, tty: bool,
                      stdin: int | None = 0, stdout: BinaryIO | None = None,
                      stderr: BinaryIO | None = None) -> int:
    """Run ``argv`` (empty with ``tty``: the login shell) in task ``task_id``; returns its exit code.

    ``stdin``: the fd forwarded (None: nothing, EOF at once). Raises ExecFailed when the service refuses."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    out = stdout or sys.stdout.buffer
    err = stderr or sys.stderr.buffer
    local_tty = tty and stdin is not None and os.isatty(stdin)
    rows, cols = _terminal_size(stdin) if local_tty and stdin is not None else (24, 80)
    request = HTTPRequest(exec_url(base_url, task_id), headers=dict(headers), connect_timeout=30,
                          request_timeout=None)
    try:
        conn = await websocket_connect(request, max_message_size=MAX_MESSAGE)
    except Exception as exc:  # tornado's HTTPClientError, OSError, WebSocketError...
        raise ExecFailed(_refusal(exc)) from None
    first: dict[str, Any] = {"argv": list(argv), "tty": tty, "rows": rows, "cols": cols}
    await conn.write_message(json.dumps(first))
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    saved = None
    if local_tty and stdin is not None:
        import termios
        import tty as ttymod

        saved = termios.tcgetattr(stdin)
        ttymod.setraw(stdin)

        def resized() -> None:
            r, c = _terminal_size(stdin)
            with contextlib.suppress(Exception):  # the socket closing: the session ends anyway
                conn.write_message(json.dumps({"resize": [r, c]}))

        loop.add_signal_handler(signal.SIGWINCH, resized)

    async def forward() -> None:
        if stdin is None:
            if not tty:
                await conn.write_message(json.dumps({"eof": True}))
            return
        _StdinReader(stdin, loop, queue)
        while True:
            data = await queue.get()
            if data is None:
                if not tty:
                    await conn.write_message(json.dumps({"eof": True}))
                return
            await conn.write_message(data, binary=True)

    sender = asyncio.ensure_future(forward())
    code: int | None = None
    problem = ""
    try:
        while True:
            msg = await conn.read_message()
            if msg is None:
                break
            if isinstance(msg, bytes):
                if not msg:
                    continue
                target = err if msg[0] == 2 else out
                target.write(msg[1:])
                target.flush()
                continue
            try:
                obj = json.loads(msg)
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("exit"), int):
                code = obj["exit"]
            elif isinstance(obj, dict) and obj.get("error"):
                problem = str(obj["error"])
    finally:
        sender.cancel()
        if saved is not None and stdin is not None:
            import termios

            loop.remove_signal_handler(signal.SIGWINCH)
            termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        conn.close()
    if code is None:
        reason = problem or conn.close_reason or "the connection closed before the command's exit status came"
        raise ExecFailed(reason)
    return code
