"""tcloud commands for a running task's web ports: ``open`` and ``port-forward``.

``tcloud open ID [PORT]`` prints the task's proxy URL (the service URL + ``/tasks/ID/proxy/PORT/``)
and opens it in a browser on a desktop (``DISPLAY``/``WAYLAND_DISPLAY`` set, or macOS) unless
``--print``; without PORT it takes the task's TensorBoard port, else its only port, else lists
them and exits 1. ``tcloud port-forward ID PORT [LOCAL]`` listens on 127.0.0.1:LOCAL (default PORT)
and carries each connection through the service's tunnel WebSocket
(``/api/tasks/ID/ports/PORT/tunnel``, the token in its header) until Ctrl-C.

Heavy modules (tornado, asyncio, webbrowser) are imported inside the commands.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

CHUNK = 64 * 1024


def _ports(obj: Any, task_id: int) -> list[dict[str, Any]]:
    from .tcloud import _call

    out = _call(obj.client.ports, task_id)
    return [p for p in out.get("ports", []) if isinstance(p, dict)]


def _choose(task_id: int, ports: list[dict[str, Any]]) -> int:
    """The port ``tcloud open`` takes when none is named (or exit 1 with the list)."""
    from .tcloud import _die

    for p in ports:
        if p.get("label") == "TensorBoard":
            return int(p["port"])
    live = [p for p in ports if p.get("listening")] or ports
    if len(live) == 1:
        return int(live[0]["port"])
    if not live:
        _die(f"task {task_id} declares no port and listens on none (yet); name one: tcloud open {task_id} PORT")
    for p in live:
        flags = ", ".join(w for w, on in (("declared", p.get("declared")), ("listening", p.get("listening"))) if on)
        click.echo(f"{p['port']}\t{p.get('label') or ''}\t{flags}")
    _die(f"task {task_id} has {len(live)} ports; name one: tcloud open {task_id} PORT")


def _desktop() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) or sys.platform == "darwin"


def register(cli: click.Group) -> None:
    """Add this module's commands to tcloud."""

    @cli.command("open")
    @click.argument("task_id", type=int)
    @click.argument("port", type=click.IntRange(1, 65535), required=False)
    @click.option("--print", "print_only", is_flag=True, help="Only print the URL (never open a browser).")
    @click.pass_obj
    def open_(obj: Any, task_id: int, port: int | None, print_only: bool) -> None:
        """Print (and on a desktop, open) the URL of a running task's web port.

        Without PORT: the task's TensorBoard, else its only port, else the list of its ports."""
        ports = _ports(obj, task_id)
        if port is None:
            port = _choose(task_id, ports)
        url = f"{obj.client.url}/tasks/{task_id}/proxy/{port}/"
        click.echo(url)
        if not print_only and _desktop():
            import webbrowser

            webbrowser.open(url)

    @cli.command("port-forward")
    @click.argument("task_id", type=int)
    @click.argument("port", type=click.IntRange(1, 65535))
    @click.argument("local", type=click.IntRange(0, 65535), required=False)
    @click.pass_obj
    def port_forward(obj: Any, task_id: int, port: int, local: int | None) -> None:
        """Forward 127.0.0.1:LOCAL (default: PORT) to a running task's PORT, through the service, until Ctrl-C."""
        import asyncio

        from .tcloud import _call, _die

        client = obj.client
        status = _call(client.show, task_id).get("status")  # the caller's task (or they learn why not)...
        if status != "running":  # ...and running, before anything listens
            _die(f"task {task_id} is {status}, not running; only a running task's ports can be forwarded")
        ws_url = client.url.replace("https://", "wss://", 1).replace("http://", "ws://", 1) + \
            f"/api/tasks/{task_id}/ports/{port}/tunnel"
        try:
            asyncio.run(_forward(ws_url, dict(client.headers), local if local is not None else port, task_id, port))
        except KeyboardInterrupt:
            click.echo("stopped", err=True)
        except OSError as exc:
            _die(f"cannot listen on 127.0.0.1:{local if local is not None else port}: {exc.strerror or exc}")


async def _forward(ws_url: str, headers: dict[str, str], local: int, task_id: int, port: int) -> None:
    import asyncio

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _tunnel(ws_url, headers, reader, writer)
        except asyncio.CancelledError:  # Ctrl-C: end quietly (3.11's start_server logs a cancelled handler)
            writer.close()

    server = await asyncio.start_server(one, "127.0.0.1", local)
    bound = server.sockets[0].getsockname()[1]
    click.echo(f"forwarding 127.0.0.1:{bound} -> task {task_id} port {port} (Ctrl-C stops)", err=True)
    async with server:
        await server.serve_forever()


async def _tunnel(ws_url: str, headers: dict[str, str], reader: Any, writer: Any) -> None:
    """One local connection carried by one tunnel WebSocket, both ways, until either side closes."""
    import asyncio
    import json

    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.websocket import WebSocketClosedError, websocket_connect

    try:
        ws = await websocket_connect(HTTPRequest(ws_url, headers=headers, connect_timeout=20, request_timeout=30))
    except HTTPClientError as exc:
        body = exc.response.body if exc.response is not None and exc.response.body else b""
        try:
            message = json.loads(body)["message"]
        except (ValueError, KeyError, TypeError):
            message = str(exc)
        click.echo(f"error: {message} (HTTP {exc.code})", err=True)
        writer.close()
        return
    except OSError as exc:
        click.echo(f"error: cannot reach the service: {exc}", err=True)
        writer.close()
        return

    async def up() -> None:
        try:
            while data := await reader.read(CHUNK):
                await ws.write_message(data, binary=True)
        except (OSError, WebSocketClosedError):
            pass
        ws.close()

    async def down() -> None:
        try:
            while (msg := await ws.read_message()) is not None:
                writer.write(msg if isinstance(msg, bytes) else msg.encode())
                await writer.drain()
        except OSError:
            pass
        writer.close()

    tasks = [asyncio.ensure_future(up()), asyncio.ensure_future(down())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        ws.close()
        writer.close()
