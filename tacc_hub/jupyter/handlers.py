"""REST routes of the tacc_hub server extension, under the user's server at ``/tacc/api``.

Every route is authenticated by jupyter_server (``@web.authenticated``) and authorized on the
resource ``tacc`` (``@authorized``: GET reads, POST writes). The tacc service is called as
the server's user: URL from ``TACC_URL``, token from ``TACC_TOKEN`` or ``JUPYTERHUB_API_TOKEN``
(then the tcloud config file). Blocking work (git, nbconvert, packing, the HTTP client) runs
in a thread pool; the log stream is relayed with tornado's non-blocking HTTP client.

Routes (``PATH`` is relative to the server's root directory; anything outside it is 403):

- ``POST /tacc/api/capture``   body ``{"path", "name"?, "resources"?: {nodes, gpus, tasks_per_node, cpus,
  memory, time, partition, gpu_type}, "runtime"?, "args"?, "packages"?: bool, "kernel_id"?,
  "code"?: "snapshot" (default) | "git"}`` →
  ``{"digest", "spec", "files", "snapshot_bytes", "git", "diff", "notes"}`` (nothing is sent).
- ``POST /tacc/api/submit``    the same body → that preview plus ``"task"`` (the created task).
- ``GET  /tacc/api/tasks``     ``?state=a,b&limit=N`` → the service's task list.
- ``POST /tacc/api/tasks``     body: a TaskSpec (JSON) → the created task (the Lab panel's resubmit:
  a task's own spec again, so the same digest; its code snapshot is already on the service).
- ``GET  /tacc/api/tasks/ID``  one task (with ``queue``: position, estimated_start).
- ``POST /tacc/api/tasks/ID/cancel``
- ``GET  /tacc/api/tasks/ID/logs``         ``?offset=&limit=`` → ``{offset, next_offset, data, eof, status}``.
- ``GET  /tacc/api/tasks/ID/logs/stream``  ``?offset=`` → the service's server-sent events, relayed.
- ``GET  /tacc/api/cluster``, ``GET /tacc/api/quota``.
- ``GET|PUT /tacc/api/notifications``, ``POST /tacc/api/notifications/test``,
  ``GET /tacc/api/notifications/history``: the user's notification settings, relayed (docs/notifications.md);
  the GET's ``usage_url`` is the path of the service's "My usage" page.
- ``GET  /tacc/api/tasks/ID/ports``     → ``{"task_id", "ports": [{"port", "declared", "listening", "label", "url"}]}``
  (``url`` is the hub's ``<service>/tasks/ID/proxy/PORT/``: the browser opens it directly, not through here).
- ``GET  /tacc/api/tasks/ID/usage``     → ``{"task_id", "interval", "gpus", "samples", "mean_util", "peak_util"}``.
- ``GET  /tacc/api/tasks/ID/attempts``  → ``{"task_id", "attempts": [{"attempt", "started_at", ...}]}``.
- ``POST /tacc/api/tasks/ID/extend``    body ``{"seconds": N}`` → the task (409 not running, 422 naming ``seconds``).
- ``GET  /tacc/api/arrays``            ``?limit=&before=`` → ``{"arrays": [ArrayOut], "next_before"}`` (the user's own).
- ``GET  /tacc/api/arrays/ID``         ``?state=a,b`` → the array with its elements (``"tasks"``, index order).
- ``POST /tacc/api/arrays/ID/cancel``  cancels every element not yet ended → the array.
- ``GET  /tacc/api/pipelines``, ``GET /tacc/api/pipelines/ID``, ``POST /tacc/api/pipelines/ID/cancel``: the same
  for pipelines (``{"pipelines": [...]}``; a pipeline lists its steps in order with their status).
  Arrays and pipelines of other users are the service's 404, relayed as such.
- ``WS   /tacc/api/tasks/ID/exec``      relayed frame for frame to the service's ``api/tasks/ID/exec`` (the Lab
  panel's terminal). jupyter_server authenticates the browser (cookie or token, its origin check) and the user
  must be allowed to *execute* on ``tacc``; the service is called with the user's token (Authorization header).
  Failing to reach the service, the relay sends one text frame ``{"error", "status"}`` and closes (code 1011).

Errors answer ``{"message", "errors"?: [{"field", "message"}]}`` with the service's status
(502 when the service cannot be reached).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlencode

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.httputil import HTTPInputError
from tornado.iostream import StreamClosedError
from tornado.websocket import WebSocketClientConnection, WebSocketClosedError, WebSocketHandler, websocket_connect

from tacc_hub.client import ApiClientError

from .capture import CaptureError, capture, client_from_env, submit_captured

AUTH_RESOURCE = "tacc"


class TaccHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    def _fail(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        self.set_status(status)
        self.finish(json.dumps({"message": message, **({"errors": errors} if errors else {})}))

    async def _run(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, partial(fn, *args, **kw))

    async def _service(self, method: str, *args: Any, **kw: Any) -> Any:
        """Call TaccClient.METHOD in a thread (one client per call: http.client is not thread-safe)."""

        def call() -> Any:
            with client_from_env() as client:
                return getattr(client, method)(*args, **kw)

        return await self._run(call)

    async def _relay(self, method: str, *args: Any, **kw: Any) -> None:
        try:
            out = await self._service(method, *args, **kw)
        except ApiClientError as exc:
            self._fail(exc.status or 502, exc.message, exc.errors)
            return
        self.finish(json.dumps(out))

    def _int_arg(self, name: str, default: int) -> int:
        raw = self.get_argument(name, None)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise web.HTTPError(400, f"{name} must be an integer") from None
        if value < 0:
            raise web.HTTPError(400, f"{name} must not be negative")
        return value


class CaptureHandler(TaccHandler):
    submit = False

    def _kernel_python(self, kernel_id: str) -> str | None:
        try:
            km = self.kernel_manager.get_kernel(kernel_id)
        except KeyError:
            raise web.HTTPError(404, f"no kernel {kernel_id}") from None
        argv = list(getattr(km.kernel_spec, "argv", []) or [])
        if not argv or argv[0] in ("python", "python3", "{python}", sys.executable):
            return None  # jupyter_client starts "python" kernels with the server's own interpreter
        return shutil.which(argv[0]) or argv[0]

    @web.authenticated
    @authorized
    async def post(self) -> None:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            self._fail(400, "the body must be JSON")
            return
        if not isinstance(body, dict) or not isinstance(body.get("path"), str):
            self._fail(400, 'give {"path": NOTEBOOK_OR_SCRIPT, ...} (relative to the server root)')
            return
        resources = body.get("resources") or {}
        args = body.get("args") or []
        if not isinstance(resources, dict) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            self._fail(400, "resources must be an object and args a list of strings")
            return
        if not all(isinstance(body.get(k), str | None) for k in ("name", "runtime", "kernel_id")):
            self._fail(400, "name, runtime and kernel_id must be strings")
            return
        python = self._kernel_python(str(body["kernel_id"])) if body.get("kernel_id") else None
        try:
            cap = await self._run(
                capture, body["path"], root_dir=self.settings["server_root_dir"], name=body.get("name"),
                resources=resources, runtime=body.get("runtime"), args=args,
                pin_packages=bool(body.get("packages", True)), python=python, code=str(body.get("code", "snapshot")),
            )
        except CaptureError as exc:
            self._fail(exc.status, exc.message, exc.errors)
            return
        out = cap.preview()
        if self.submit:
            def send() -> dict[str, Any]:
                with client_from_env() as client:
                    return submit_captured(client, cap)

            try:
                out["task"] = await self._run(send)
            except ApiClientError as exc:
                self._fail(exc.status or 502, exc.message, exc.errors)
                return
        self.finish(json.dumps(out))


class SubmitHandler(CaptureHandler):
    submit = True


class TasksHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        states = [s for s in self.get_argument("state", "").split(",") if s]
        await self._relay("list", states=states or None, limit=self._int_arg("limit", 50))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        try:
            spec = json.loads(self.request.body or b"")
        except ValueError:
            spec = None
        if not isinstance(spec, dict):
            self._fail(400, "the body must be a TaskSpec as a JSON object")
            return
        await self._relay("submit", spec)


class TaskHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def get(self, task_id: str) -> None:
        await self._relay("show", int(task_id))


class CancelHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def post(self, task_id: str) -> None:
        await self._relay("cancel", int(task_id))


class LogsHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def get(self, task_id: str) -> None:
        await self._relay("logs", int(task_id), offset=self._int_arg("offset", 0),
                          limit=min(self._int_arg("limit", 1024 * 1024), 1024 * 1024))


class GroupHandler(TaccHandler):
    """Arrays and pipelines (issue 20), relayed by path: only the query arguments named here are passed on.

    ``kind`` is ``arrays`` or ``pipelines``; the id in the path is digits (the route says so), so nothing the
    browser sends reaches the service's path but a number; query values go through urlencode.
    """

    kind = "arrays"
    passed: tuple[str, ...] = ()

    async def _path(self, method: str, path: str) -> None:
        params: dict[str, Any] = {}
        for name in self.passed:
            raw = self.get_argument(name, None)
            if raw is None:
                continue
            if name in ("limit", "before"):
                params[name] = self._int_arg(name, 0)
            else:
                params[name] = ",".join(s for s in raw.split(",") if s)
        await self._relay("_json", method, path, params=params or None)


class GroupsHandler(GroupHandler):
    passed = ("limit", "before")

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self._path("GET", f"/api/{self.kind}")


class GroupOneHandler(GroupHandler):
    passed = ("state",)

    @web.authenticated
    @authorized
    async def get(self, group_id: str) -> None:
        await self._path("GET", f"/api/{self.kind}/{int(group_id)}")


class GroupCancelHandler(GroupHandler):
    @web.authenticated
    @authorized
    async def post(self, group_id: str) -> None:
        await self._path("POST", f"/api/{self.kind}/{int(group_id)}/cancel")


class PipelinesHandler(GroupsHandler):
    kind = "pipelines"


class PipelineHandler(GroupOneHandler):
    kind = "pipelines"


class PipelineCancelHandler(GroupCancelHandler):
    kind = "pipelines"


class BrowserGone(HTTPInputError):
    """Raised from the upstream fetch's streaming callback to drop it once the browser has gone.

    tornado logs any other exception from that callback as "Uncaught exception" with a traceback
    (a closed tab is no error); an HTTPInputError it only notes at INFO and closes the connection.
    """


class LogStreamHandler(TaccHandler):
    """Relays the service's SSE log stream byte for byte (non-blocking, chunk by chunk).

    When the browser goes away the upstream request is dropped at its next chunk (a log line, or the
    service's keep-alive, sent at least every 15 s), without a traceback in the server's log.
    """

    _gone = False

    def _closed(self) -> bool:
        stream = getattr(self.request.connection, "stream", None)
        return bool(stream is not None and stream.closed())

    def on_connection_close(self) -> None:
        self._gone = True
        super().on_connection_close()

    @web.authenticated
    @authorized
    async def get(self, task_id: str) -> None:
        from tacc_hub.cli.settings import resolve

        url, token = resolve(None, None)
        offset = self._int_arg("offset", 0)
        last = self.request.headers.get("Last-Event-ID")
        if last and last.isdigit():
            offset = int(last)
        target = f"{url.rstrip('/')}/api/tasks/{int(task_id)}/logs/stream?{urlencode({'offset': offset})}"
        started = False
        upstream_status = 0
        error_body = bytearray()

        def on_header(line: str) -> None:
            nonlocal upstream_status
            if line.startswith("HTTP/"):  # a status line (a 100 Continue would be followed by another)
                parts = line.split(" ", 2)
                upstream_status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 502

        def on_chunk(chunk: bytes) -> None:
            nonlocal started
            if self._gone or self._closed():
                self._gone = True
                raise BrowserGone("the browser closed its log stream")  # aborts the upstream fetch, quietly
            if upstream_status >= 400:
                error_body.extend(chunk[: 65536 - len(error_body)])
                return
            if not started:
                started = True
                self.set_header("Content-Type", "text/event-stream")
                self.set_header("Cache-Control", "no-cache")
                self.set_header("X-Accel-Buffering", "no")
            self.write(chunk)
            self.flush()

        request = HTTPRequest(target, headers={"Authorization": f"token {token}"} if token else {},
                              header_callback=on_header, streaming_callback=on_chunk, request_timeout=0,
                              connect_timeout=20)
        try:
            await AsyncHTTPClient().fetch(request, raise_error=True)
        except HTTPClientError as exc:
            if started or self._gone:
                return
            message = exc.message or "error"
            try:
                message = json.loads(bytes(error_body)).get("message", message)
            except ValueError:
                pass
            self._fail(exc.code if exc.code != 599 else 502, message)
            return
        except StreamClosedError:
            return  # the browser went away
        except OSError as exc:
            if not started and not self._gone:
                self._fail(502, f"cannot reach the tacc_hub service at {url}: {exc}")
            return
        self.finish()


class ClusterHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self._relay("cluster")


class QuotaHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self._relay("my_quota")


class PortsHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def get(self, task_id: str) -> None:
        await self._relay("ports", int(task_id))


class UsageHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def get(self, task_id: str) -> None:
        await self._relay("usage", int(task_id))


class AttemptsHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def get(self, task_id: str) -> None:
        await self._relay("attempts", int(task_id))


class ExtendHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def post(self, task_id: str) -> None:
        try:
            body = json.loads(self.request.body or b"")
        except ValueError:
            body = None
        seconds = body.get("seconds") if isinstance(body, dict) else None
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds <= 0:
            self._fail(422, 'give {"seconds": N}, a whole number of seconds above 0',
                       [{"field": "seconds", "message": "must be a whole number of seconds above 0"}])
            return
        await self._relay("extend", int(task_id), seconds)


class NotificationsHandler(TaccHandler):
    """The user's notification settings, relayed (GET; PUT replaces them: the service validates the body)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self._relay("notifications")

    @web.authenticated
    @authorized
    async def put(self) -> None:
        try:
            body = json.loads(self.request.body or b"")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._fail(400, "give the settings as a JSON object", [{"field": "body", "message": "not a JSON object"}])
            return
        await self._relay("set_notifications", body)


class NotificationTestHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def post(self) -> None:
        await self._relay("test_notification")


class NotificationHistoryHandler(TaccHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self._relay("notification_history", min(self._int_arg("limit", 50), 200) or 1)


EXEC_MAX_MESSAGE = 4 * 1024 * 1024  # a frame larger than this (either way) closes the relay


class ExecRelay(WebSocketMixin, JupyterHandler, WebSocketHandler):
    """The service's exec WebSocket, relayed frame for frame (text stays text, binary stays binary).

    Each direction waits for the other side to take a frame before reading the next (no unbounded
    buffering here); either side closing closes the other, with the service's close code passed on.
    """

    auth_resource = AUTH_RESOURCE
    upstream: WebSocketClientConnection | None = None
    _closing = False
    _pumping: asyncio.Future[None] | None = None

    async def get(self, *args: Any, **kwargs: Any) -> None:
        user = self.current_user
        if not user:
            raise web.HTTPError(403)
        if self.authorizer is not None and not await ensure_async(
                self.authorizer.is_authorized(self, user, "execute", self.auth_resource)):
            raise web.HTTPError(403)
        await ensure_async(super().get(*args, **kwargs))  # type: ignore[arg-type]

    def _upstream_url(self, task_id: int) -> tuple[str, str | None]:
        from tacc_hub.cli.settings import resolve

        url, token = resolve(None, None)
        base = url.rstrip("/")
        if base.startswith("https://"):
            base = "wss://" + base[len("https://"):]
        elif base.startswith("http://"):
            base = "ws://" + base[len("http://"):]
        return f"{base}/api/tasks/{task_id}/exec", token

    async def _give_up(self, status: int, message: str) -> None:
        try:
            await self.write_message(json.dumps({"error": message, "status": status}))
        except WebSocketClosedError:
            return
        self.close(1011, message.encode()[:120].decode(errors="ignore"))  # a close reason: <= 123 bytes

    async def open(self, task_id: str) -> None:
        target, token = self._upstream_url(int(task_id))
        request = HTTPRequest(target, headers={"Authorization": f"token {token}"} if token else {},
                              connect_timeout=20, request_timeout=30)
        try:
            self.upstream = await websocket_connect(request, max_message_size=EXEC_MAX_MESSAGE)
        except HTTPClientError as exc:
            message = exc.message or "error"
            body = exc.response.body if exc.response is not None else b""
            try:
                message = json.loads(body or b"").get("message", message)
            except (ValueError, AttributeError):
                pass
            await self._give_up(exc.code if exc.code != 599 else 502, message)
            return
        except OSError as exc:
            await self._give_up(502, f"cannot reach the tacc_hub service: {exc}")
            return
        if self._closing:  # the browser left while we connected
            self.upstream.close()
            return
        self._pumping = asyncio.ensure_future(self._pump())

    async def _pump(self) -> None:
        """Service → browser, until the service closes."""
        assert self.upstream is not None
        while True:
            msg = await self.upstream.read_message()
            if msg is None:
                break
            try:
                await self.write_message(msg, binary=isinstance(msg, bytes))
            except WebSocketClosedError:
                break
        code = self.upstream.close_code
        if not self._closing:
            self.close(code if code and code not in (1005, 1006) else 1000, self.upstream.close_reason)

    async def on_message(self, message: str | bytes) -> None:
        if self.upstream is None:
            return
        try:
            await self.upstream.write_message(message, binary=isinstance(message, bytes))
        except WebSocketClosedError:
            self.close(1011, "the service closed the session")

    def on_close(self) -> None:
        self._closing = True
        if self.upstream is not None:
            self.upstream.close(1000)


ROUTES: list[tuple[str, type[TaccHandler] | type[ExecRelay]]] = [
    (r"/tacc/api/capture", CaptureHandler),
    (r"/tacc/api/submit", SubmitHandler),
    (r"/tacc/api/tasks", TasksHandler),
    (r"/tacc/api/tasks/(\d+)", TaskHandler),
    (r"/tacc/api/tasks/(\d+)/cancel", CancelHandler),
    (r"/tacc/api/tasks/(\d+)/logs", LogsHandler),
    (r"/tacc/api/tasks/(\d+)/logs/stream", LogStreamHandler),
    (r"/tacc/api/tasks/(\d+)/ports", PortsHandler),
    (r"/tacc/api/tasks/(\d+)/usage", UsageHandler),
    (r"/tacc/api/tasks/(\d+)/attempts", AttemptsHandler),
    (r"/tacc/api/tasks/(\d+)/extend", ExtendHandler),
    (r"/tacc/api/tasks/(\d+)/exec", ExecRelay),
    (r"/tacc/api/arrays", GroupsHandler),
    (r"/tacc/api/arrays/(\d+)", GroupOneHandler),
    (r"/tacc/api/arrays/(\d+)/cancel", GroupCancelHandler),
    (r"/tacc/api/pipelines", PipelinesHandler),
    (r"/tacc/api/pipelines/(\d+)", PipelineHandler),
    (r"/tacc/api/pipelines/(\d+)/cancel", PipelineCancelHandler),
    (r"/tacc/api/cluster", ClusterHandler),
    (r"/tacc/api/quota", QuotaHandler),
    (r"/tacc/api/notifications", NotificationsHandler),
    (r"/tacc/api/notifications/test", NotificationTestHandler),
    (r"/tacc/api/notifications/history", NotificationHistoryHandler),
]


def setup_handlers(web_app: Any) -> None:
    base = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base, route), handler) for route, handler in ROUTES])
