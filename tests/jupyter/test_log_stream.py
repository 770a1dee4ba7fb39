"""The relayed log stream when the browser goes away (a tab closed mid-stream)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from jupyter_server.utils import url_path_join

from .test_extension import call


async def open_then_drop(port: int, path: str, headers: dict[str, str]) -> bytes:
    """GET path, read until the first log event, then close the connection as a closing tab does."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n{head}\r\n".encode())
    await writer.drain()
    got = b""
    while b"event: log" not in got:
        chunk = await asyncio.wait_for(reader.read(65536), 60)
        assert chunk, got
        got += chunk
    writer.transport.abort()  # the tab is gone: no FIN handshake, like a browser killed
    return got


def test_closing_the_tab_mid_stream_is_quiet(jp_asyncio_loop, jp_fetch, jp_root_dir, jp_http_port, jp_base_url,
                                             jp_auth_header, tacc_env, caplog: Any):
    loop = jp_asyncio_loop
    (jp_root_dir / "chatty.py").write_text(
        "import time\nfor i in range(600):\n    print('line', i, 'x' * 2000, flush=True)\n    time.sleep(0.05)\n")
    code, out = call(loop, jp_fetch, "POST", "submit", body={"path": "chatty.py", "packages": False})
    assert code == 200, out
    tid = str(out["task"]["id"])
    path = url_path_join(jp_base_url, "tacc", "api", "tasks", tid, "logs", "stream")
    caplog.set_level(logging.DEBUG)
    try:
        got = loop.run_until_complete(open_then_drop(jp_http_port, path, jp_auth_header))
        assert b"200 OK" in got.split(b"\r\n", 1)[0]
        loop.run_until_complete(asyncio.sleep(4))  # the task keeps writing: the relay meets the closed socket
        # the relay ended (it stopped reading upstream) while the task still runs
        assert any("GET" in r.getMessage() and "logs/stream" in r.getMessage() for r in caplog.records)
        assert json.loads(loop.run_until_complete(jp_fetch("tacc", "api", "tasks", tid)).body)["status"] == "running"
    finally:
        call(loop, jp_fetch, "POST", "tasks", tid, "cancel", body={})
    loop.run_until_complete(asyncio.sleep(0.5))
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING and (
        "Uncaught exception" in r.getMessage() or "StreamClosedError" in (r.exc_text or repr(r.exc_info) or ""))]
    assert not noisy, [(r.name, r.getMessage(), r.exc_info) for r in noisy]
