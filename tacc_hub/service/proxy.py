"""Reaching a task's web ports: ``tasks/ID/proxy/PORT/...`` (HTTP and WebSocket), ``api/tasks/ID/ports`` and
the TCP tunnel ``api/tasks/ID/ports/PORT/tunnel`` (``tcloud port-forward``).

``<base_url>tasks/ID/proxy/PORT/<path>`` sends ``/<path>`` (prefix stripped, ``X-Forwarded-Prefix`` set)
to ``executor.task_host(...)``:PORT; ``<base_url>tasks/ID/proxy/absolute/PORT/<path>`` sends the whole
path (for servers told their prefix, e.g. ``tensorboard --path_prefix``). Every method and WebSocket
upgrades; bodies stream both ways (the request body, at most ``max_code_bytes``, is written upstream
as it arrives; the response is written to the caller as it arrives, each chunk flushed before the
next is read), so nothing is held whole.

Invariants:
- Callers are identified as by the API (a token header, or in hub mode the service's hub OAuth
  cookie; a browser GET without either is sent to the hub's login, anything else gets 401). Only the
  task's owner and admins reach it; anyone else gets 404, as for a task that does not exist. A task
  that is not running: 409 naming its state.
- A port is proxied only while the executor says THIS task serves it (``executor.port_owned``; see
  ``executors/ports.py``): not another user's task, nor the service, the hub or any other process
  on the node (404 "task ID does not listen on port P"). A yes is remembered ``OWNED_TTL`` seconds.
- The caller's credentials never reach the task; its cookies stay under the proxy path
  (``proxy_headers``). An admin looking at another user's task gets every response with
  ``Content-Security-Policy: sandbox allow-scripts allow-forms allow-popups``: the page runs in an
  opaque origin and cannot act with the admin's hub session.
- With the cookie, a change (POST, PUT, ...) and a WebSocket must come from a page of this origin
  (``Sec-Fetch-Site``/``Origin``); tokens need no such check.
- One audit row (action ``proxy``) per (user, task, port) per service run.
- The task's TensorBoard port (``tensorboard_port`` in its state) serves only under a secret path prefix
  (``tensorboard_secret``; TensorBoard has no login, and anyone on the node can connect to it): in
  stripped mode the proxy sends ``/<secret>/<path>`` and the caller never sees the secret (redirects and
  cookie paths given back without it, other headers holding it dropped, a body holding it cut off;
  ``proxy_headers.SecretGuard``). Absolute mode sends no secret: TensorBoard answers 404 there; the TCP
  tunnel refuses that port (409: raw bytes cannot carry the secret; ``tcloud open`` uses the proxy).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import tornado.web
import tornado.websocket
from tornado import httputil, iostream
from tornado.http1connection import HTTP1Connection, HTTP1ConnectionParameters
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.tcpclient import TCPClient

from tacc_hub.executors.base import ExecUnsupported
from tacc_hub.scheduler.cluster import Placement
from tacc_hub.store import TaskRecord, TaskStatus

from .auth import Denied, Identity
from .base import MAX_ID, SMALL_BODY_BYTES, ApiError, ApiHandler, ServiceContext
from .proxy_headers import (
    HiddenRewrite,
    SecretGuard,
    query_without_token,
    request_headers,
    reserved_cookie,
    response_headers,
    rewritable,
    same_origin,
    tensorboard_accept_encoding,
    tensorboard_prefix,
)

log = logging.getLogger("tacc_hub.proxy")

OWNED_TTL = 3.0  # seconds a "this task serves that port" answer is trusted
CONNECT_TIMEOUT = 10.0
MAX_HEADER_BYTES = 64 * 1024
MAX_RESPONSE_BYTES = 2**50  # a response body is streamed: no practical cap
CHUNK = 64 * 1024
SANDBOX = "sandbox allow-scripts allow-forms allow-popups"
EXTRA_METHODS = ("PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "REPORT", "SEARCH")

_owned: dict[tuple[int, int, str], float] = {}  # (task, port, run) -> monotonic expiry of a yes
_audited: set[tuple[str, int, int]] = set()  # (user, task, port) recorded in this service run


@dataclass(frozen=True)
class Target:
    """A task's port the caller may reach: where to connect and how to present it."""

    rec: TaskRecord
    port: int
    host: str
    foreign_admin: bool  # an admin looking at someone else's task (responses sandboxed)


def _task_id(text: str) -> int:
    tid = int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else 0
    if not 0 < tid <= MAX_ID:
        raise ApiError(404, f"no task {text[:32]!r}")
    return tid


def _run_key(rec: TaskRecord) -> str:
    """What tells one run of a task from the next (a restarted task's new server is checked again)."""
    state = rec.executor_state or {}
    return json.dumps([state.get("pid"), state.get("start_time"), state.get("job_id")], default=str)


async def admit(ctx: ServiceContext, who: Identity, task_text: str, port_text: str) -> Target:
    """The caller's way to a task's port, or the ApiError that answers them (404, 409, 501, 502)."""
    tid = _task_id(task_text)
    rec = ctx.store.get(tid)
    if rec is None or (rec.owner != who.user and not who.admin):
        raise ApiError(404, f"no task {tid}")
    if rec.status != TaskStatus.RUNNING:
        raise ApiError(409, f"task {tid} is {rec.status.value}, not running; only a running task's ports can be "
                            "reached", [{"field": "status", "message": f"{rec.status.value}, not running"}])
    port = int(port_text) if port_text.isascii() and port_text.isdigit() and len(port_text) <= 5 else 0
    if not 0 < port < 65536:
        raise ApiError(404, f"task {tid} does not listen on port {port_text[:8]}")
    ex = ctx.controller.executor
    state = rec.executor_state or {}
    placement = Placement.model_validate(rec.placement) if rec.placement else None
    key = (tid, port, _run_key(rec))
    now = time.monotonic()
    if _owned.get(key, 0.0) <= now:
        try:
            owned = await ex.port_owned(tid, state, placement, port)
        except ExecUnsupported as exc:
            raise ApiError(501, str(exc)) from None
        except Exception as exc:  # the cluster could not be asked (Slurm down): not the caller's fault
            log.warning("checking port %d of task %d failed: %s", port, tid, exc)
            raise ApiError(502, f"could not check which ports task {tid} listens on: {str(exc)[:300]}") from None
        if not owned:
            _owned.pop(key, None)
            raise ApiError(404, f"task {tid} does not listen on port {port}")
        if len(_owned) > 10000:
            _owned.clear()
        _owned[key] = now + OWNED_TTL
    try:
        host = ex.task_host(tid, state, placement)
    except ExecUnsupported as exc:
        raise ApiError(501, str(exc)) from None
    mark = (who.user, tid, port)
    if mark not in _audited:
        ctx.store.add_audit(who.user, "proxy", tid, {"port": port}, target=f"task:{tid}")
        _audited.add(mark)
    return Target(rec, port, host, foreign_admin=rec.owner != who.user)


def _error_body(status: int, message: str, errors: list[dict[str, str]] | None = None) -> str:
    return json.dumps({"status": status, "message": message, "errors": errors or []})


class _Relay(httputil.HTTPMessageDelegate):
    """Writes the task's response to the caller as it arrives (headers rewritten), one flushed chunk at a time."""

    def __init__(self, handler: ProxyHandler) -> None:
        self.handler = handler
        self.started = False
        self.guard: SecretGuard | None = None  # a hidden TensorBoard's streamed body: cut off if it shows the secret
        self.rewrite: HiddenRewrite | None = None  # a hidden TensorBoard's JSON body: read whole, secret replaced
        self.refusal: ApiError | None = None  # answered in place of a rewritten body that could not be

    def headers_received(self, start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
                         headers: httputil.HTTPHeaders) -> Any:
        assert isinstance(start_line, httputil.ResponseStartLine)
        if 100 <= start_line.code < 200:
            return None  # an interim answer (100 Continue): the real one follows
        h = self.handler
        h.set_status(start_line.code, start_line.reason or None)
        h._headers = httputil.HTTPHeaders()
        encoding = headers.get("Content-Encoding", "")
        if h.hidden and h.prefix is not None and rewritable(headers, h.request.method or "GET", start_line.code):
            self.rewrite = HiddenRewrite(h.hidden, h.prefix, encoding)
        elif h.hidden:
            self.guard = SecretGuard(h.hidden.lstrip("/"), encoding)
        for name, value in response_headers(headers, scope=h.scope, prefix=h.prefix, backend=h.backend,
                                            service_cookie=h.service_cookie, hidden=h.hidden):
            if self.rewrite is not None and name.lower() in ("content-length", "content-encoding", "etag"):
                continue  # the body changes: its length is counted again, it goes out decoded
            try:
                h.add_header(name, value)
            except ValueError:
                continue  # a value tornado will not send (control characters)
        if h.target is not None and h.target.foreign_admin:
            h.add_header("Content-Security-Policy", SANDBOX)
        self.started = True
        return None if self.rewrite is not None else h.flush()

    def _cut(self, why: str) -> None:
        h = self.handler
        log.warning("task %s: the response of its TensorBoard %s; cut off", h.target.rec.id if h.target else "?", why)
        h._close_upstream()  # read_response ends (StreamClosedError), and _relay closes the caller's connection

    def data_received(self, chunk: bytes) -> Any:
        if self.refusal is not None:
            return None
        if self.rewrite is not None:
            if not self.rewrite.feed(chunk):
                self.refusal = ApiError(502, "the task's TensorBoard answered with a body the proxy cannot pass "
                                             "on (over its size limit, or not decodable)")
                self.handler._close_upstream()  # nothing more is read
            return None
        if self.guard is not None and self.guard.leaks(chunk):
            self._cut("holds its secret path")
            return None
        self.handler.write(chunk)
        return self.handler.flush()

    def finish(self) -> None:
        if self.rewrite is None or self.refusal is not None:
            return
        body = self.rewrite.result()
        if body is None:
            log.warning("task %s: the response of its TensorBoard holds its secret path; refused",
                        self.handler.target.rec.id if self.handler.target else "?")
            self.refusal = ApiError(502, "the task's TensorBoard answered with what the proxy does not pass on")
            return
        self.handler.write(body)

    def on_connection_close(self) -> None:
        pass


@tornado.web.stream_request_body
class ProxyHandler(tornado.websocket.WebSocketHandler):
    """``tasks/ID/proxy/PORT/...`` and ``tasks/ID/proxy/absolute/PORT/...``: a task's port, HTTP and WebSocket."""

    public: ClassVar[bool] = False
    SUPPORTED_METHODS = (*tornado.web.RequestHandler.SUPPORTED_METHODS, *EXTRA_METHODS)
    openapi: ClassVar[dict[str, dict[str, Any]]] = {
        "get": {"summary": "Proxy to a running task's port (any method; WebSocket upgrades too). The path after "
                           "tasks/ID/proxy/PORT is what the task's server gets (X-Forwarded-Prefix set); under "
                           "tasks/ID/proxy/absolute/PORT/ it gets the whole path. Owner and admins only (404 for "
                           "others), 409 when the task is not running, 404 when the task does not listen on the "
                           "port. Not under /api: the response is the task's own.",
                "errors": {"409": "the task is not running", "502": "the task's server did not answer"}},
    }
    PATH = re.compile(r"(?P<base>.*/)tasks/(?P<id>\d+)/proxy/(?P<abs>absolute/)?(?P<port>\d+)(?P<rest>/.*)?$")

    def initialize(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.target: Target | None = None
        self.identity: Identity | None = None
        self.upstream: HTTP1Connection | None = None
        self.upstream_stream: iostream.IOStream | None = None
        self.backend_ws: tornado.websocket.WebSocketClientConnection | None = None
        self.websocket = False
        self.received = 0
        self.scope = "/"
        self.prefix: str | None = None
        self.backend = ""
        self.hidden: str | None = None  # the secret path prefix of the task's TensorBoard, sent but never shown
        self.service_cookie: str | None = None
        self._pump: asyncio.Task[None] | None = None
        self.refused: ApiError | None = None
        self.redirect_to: str | None = None  # answered by the method, once the (empty) body is read
        connection = self.request.connection
        if isinstance(connection, HTTP1Connection):
            connection.set_max_body_size(ctx.max_code_bytes)

    # --- answers of our own -------------------------------------------------------------

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = self._reason
        errors: list[dict[str, str]] = []
        if isinstance(exc, ApiError):
            message, errors = exc.message, exc.errors
        elif isinstance(exc, tornado.web.HTTPError) and exc.log_message:
            message = exc.log_message % exc.args if exc.args else exc.log_message
        elif status_code >= 500:
            message = "internal server error"
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(_error_body(status_code, message, errors))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, tornado.web.HTTPError):
            return
        log.error("Uncaught exception %s %s", self.request.method, self.request.path, exc_info=(typ, value, tb))

    def _request_summary(self) -> str:
        return f"{self.request.method} {self.request.path} ({self.request.remote_ip})"

    def compute_etag(self) -> str | None:
        return None  # the task's response is passed as it is

    def check_xsrf_cookie(self) -> None:
        """The hub client's XSRF rule does not fit pages a task serves; :meth:`prepare` checks the origin."""

    def _refuse(self, exc: ApiError) -> None:
        """Answer ``exc`` in place of the request (from :meth:`prepare`).

        A small body (or none) is read and dropped first and ``exc`` raised by the method, so that the
        connection stays usable (finishing before the body is read would close it); of a larger one
        nothing more is read: ``exc`` is raised now and the connection closes after the answer."""
        headers = self.request.headers
        try:
            declared = int(headers.get("Content-Length", "0").split(",")[0])
        except ValueError:
            declared = -1
        self._close_upstream()
        if 0 <= declared <= SMALL_BODY_BYTES and "Transfer-Encoding" not in headers:
            self.refused = exc
            return
        connection = self.request.connection
        if isinstance(connection, HTTP1Connection):
            connection.set_max_body_size(0)
        raise exc

    def _login_redirect(self) -> bool:
        """In hub mode, send a browser's page load without credentials to the hub's login; True if sent."""
        hub = self.settings.get("hub_auth")
        req = self.request
        if hub is None or self.websocket or req.method not in ("GET", "HEAD") or "Authorization" in req.headers:
            return False
        mode = req.headers.get("Sec-Fetch-Mode")
        if not (mode == "navigate" or (mode is None and "text/html" in req.headers.get("Accept", ""))):
            return False
        # the OAuth state lives in the hub client's singleton, which the callback page (hubpages) reads
        instance = getattr(type(hub), "instance", None)
        hub = instance() if callable(instance) else hub
        params: dict[str, str] = {}
        verifier = None
        if getattr(hub, "pkce_enabled", False):
            verifier, challenge, method = hub.generate_pkce_code_challenge()
            params.update(code_challenge=challenge, code_challenge_method=method)
        params["state"] = hub.set_state_cookie(self, next_url=req.uri, **(
            {"code_verifier": verifier} if verifier else {}))
        self.redirect_to = httputil.url_concat(hub.login_url, params)
        return True

    # --- admission ----------------------------------------------------------------------

    async def prepare(self) -> None:
        m = self.PATH.match(self.request.path)
        if m is None:
            self._refuse(ApiError(404, "no such endpoint"))
            return
        if m.group("rest") is None:  # tasks/ID/proxy/PORT: the task's pages expect to sit under a slash
            query = self.request.uri.partition("?")[2]
            self.redirect_to = self.request.path + "/" + ("?" + query if query else "")
            return
        try:
            declared = int(self.request.headers.get("Content-Length", "0").split(",")[0])
        except ValueError:
            declared = 0  # tornado answers a non-numeric Content-Length itself
        if declared > self.ctx.max_code_bytes:
            limit = self.ctx.max_code_bytes
            self._refuse(ApiError(413, f"request body of {declared} bytes is larger than the {limit} bytes the proxy "
                                       "passes on", [{"field": "body", "message": f"larger than {limit} bytes"}]))
            return
        raw_query = self.request.uri.partition("?")[2]
        self.websocket = self.request.method == "GET" and \
            self.request.headers.get("Upgrade", "").lower() == "websocket"
        try:
            self.identity = await self.ctx.auth.authenticate(self)
        except Denied as exc:
            if exc.status == 401 and self._login_redirect():
                return
            self._refuse(ApiError(exc.status, exc.message))
            return
        if self.identity.via == "hub-cookie" and (self.websocket or self.request.method not in ("GET", "HEAD",
                                                                                              "OPTIONS")):
            if not same_origin(self.request.headers):
                self._refuse(ApiError(403, "a change or a WebSocket made with the hub's login cookie must come "
                                           "from a page of this site; scripts should send a token instead"))
                return
        try:
            self.target = await admit(self.ctx, self.identity, m.group("id"), m.group("port"))
        except ApiError as exc:
            self._refuse(exc)
            return
        t = self.target
        base = m.group("base")
        self.backend = f"{t.host}:{t.port}"
        mode = "absolute/" if m.group("abs") else ""
        self.scope = f"{base}tasks/{t.rec.id}/proxy/{mode}{t.port}/"
        self.prefix = None if mode else self.scope.rstrip("/")
        path = self.request.path if mode else (m.group("rest") or "/")
        if not mode:
            self.hidden = tensorboard_prefix(t.rec.executor_state, t.port)
            path = (self.hidden or "") + path
        query = query_without_token(raw_query)
        self.upstream_target = path + ("?" + query if query else "")
        hub = self.settings.get("hub_auth")
        self.service_cookie = getattr(hub, "cookie_name", None) if hub is not None else None
        headers = request_headers(
            self.request.headers, backend=self.backend, drop_cookie=self._drop_cookie,
            forwarded_for=self.request.remote_ip or "", forwarded_host=self.request.host,
            forwarded_proto=self.request.protocol, prefix=self.prefix, websocket=self.websocket)
        if self.hidden:
            encoding = tensorboard_accept_encoding(self.request.headers)
            headers.pop("Accept-Encoding", None)
            if encoding:
                headers["Accept-Encoding"] = encoding
        self.upstream_headers = headers
        if not self.websocket:
            await self._open_upstream(headers)

    def _drop_cookie(self, name: str, value: str) -> bool:
        if reserved_cookie(name, self.service_cookie):
            return True
        if name == "_xsrf" and self.settings.get("cookie_secret"):  # the service's own (signed) XSRF token
            from tornado.web import decode_signed_value

            raw = value.strip('"')
            padded = raw + "=" * (-len(raw) % 4)
            try:
                import base64

                signed = base64.urlsafe_b64decode(padded.encode("ascii"))
            except (ValueError, UnicodeEncodeError):
                return False
            return decode_signed_value(self.settings["cookie_secret"], "_xsrf", signed, max_age_days=31,
                                       min_version=2) is not None
        return False

    # --- HTTP ---------------------------------------------------------------------------

    async def _open_upstream(self, headers: httputil.HTTPHeaders) -> None:
        req = self.request
        chunked = "Transfer-Encoding" in req.headers
        if chunked and req.method not in ("POST", "PUT", "PATCH"):
            self._refuse(ApiError(411, f"a {req.method} with a chunked body cannot be proxied; send Content-Length"))
            return
        if "Content-Length" in req.headers and not chunked:
            headers["Content-Length"] = req.headers["Content-Length"]
        elif req.method in ("POST", "PUT", "PATCH") and not chunked:
            headers["Content-Length"] = "0"
        try:
            stream = await asyncio.wait_for(TCPClient().connect(self.target.host if self.target else "",
                                                                self.target.port if self.target else 0,
                                                                af=socket.AF_INET), CONNECT_TIMEOUT)
        except (OSError, iostream.StreamClosedError, TimeoutError) as exc:
            self._refuse(ApiError(502, f"could not connect to port {self.target.port if self.target else 0} of "
                                       f"task {self.target.rec.id if self.target else 0}: {exc}"))
            return
        stream.set_nodelay(True)
        self.upstream_stream = stream
        params = HTTP1ConnectionParameters(no_keep_alive=True, chunk_size=CHUNK, max_header_size=MAX_HEADER_BYTES,
                                           max_body_size=MAX_RESPONSE_BYTES, decompress=False)
        self.upstream = HTTP1Connection(stream, True, params)
        self.upstream.write_headers(httputil.RequestStartLine(req.method or "GET", self.upstream_target, "HTTP/1.1"),
                                    headers)

    async def data_received(self, chunk: bytes) -> None:
        if self.upstream is None:
            return
        self.received += len(chunk)
        if self.received > self.ctx.max_code_bytes:  # tornado closes the connection too
            self._close_upstream()
            return
        try:
            await self.upstream.write(chunk)
        except iostream.StreamClosedError:
            self._close_upstream()

    async def _relay(self) -> None:
        if self.refused is not None:
            raise self.refused
        if self.redirect_to is not None:
            self.redirect(self.redirect_to)
            return
        conn = self.upstream
        if conn is None:
            raise ApiError(502, "the task's server closed the connection")
        relay = _Relay(self)
        stream = getattr(self.request.connection, "stream", None)
        if stream is not None:
            stream.set_nodelay(True)  # each chunk goes out as it comes (Nagle would hold a small one 40 ms)
        try:
            conn.finish()
            await conn.read_response(relay)
        except (iostream.StreamClosedError, httputil.HTTPInputError, httputil.HTTPOutputError) as exc:
            self._close_upstream()
            if relay.refusal is not None:
                raise relay.refusal from None
            if not relay.started or not self._headers_written:  # nothing sent yet (a JSON body being rewritten)
                raise ApiError(502, f"the task's server on port {self.target.port if self.target else 0} gave no "
                                    f"valid answer: {exc}") from None
            self.request.connection.close()  # type: ignore[union-attr]
            return
        finally:
            self._close_upstream()
        if relay.refusal is not None:
            raise relay.refusal
        if not relay.started:
            raise ApiError(502, "the task's server closed the connection without an answer")
        if not self._finished:
            self.finish()

    def _close_upstream(self) -> None:
        if self.upstream_stream is not None:
            self.upstream_stream.close()
        self.upstream = None

    async def get(self, *args: Any, **kwargs: Any) -> None:
        if not self.websocket or self.refused is not None or self.redirect_to is not None:
            await self._relay()
            return
        await self._open_websocket()
        await super().get(*args, **kwargs)

    async def head(self, *args: Any, **kwargs: Any) -> None:
        await self._relay()

    async def post(self, *args: Any, **kwargs: Any) -> None:
        await self._relay()

    async def put(self, *args: Any, **kwargs: Any) -> None:
        await self._relay()

    async def patch(self, *args: Any, **kwargs: Any) -> None:
        await self._relay()

    async def delete(self, *args: Any, **kwargs: Any) -> None:
        await self._relay()

    async def options(self, *args: Any, **kwargs: Any) -> None:
        await self._relay()

    def on_connection_close(self) -> None:
        self._close_upstream()
        super().on_connection_close()

    def on_finish(self) -> None:
        self._close_upstream()

    # --- WebSocket ----------------------------------------------------------------------

    async def _open_websocket(self) -> None:
        assert self.target is not None
        protocols = [p.strip() for p in self.request.headers.get("Sec-WebSocket-Protocol", "").split(",")
                     if p.strip()]
        url = f"ws://{self.backend}{self.upstream_target}"
        request = HTTPRequest(url, headers=self.upstream_headers, connect_timeout=CONNECT_TIMEOUT,
                              request_timeout=CONNECT_TIMEOUT + 20, follow_redirects=False)
        try:
            self.backend_ws = await tornado.websocket.websocket_connect(
                request, subprotocols=protocols or None, max_message_size=self.max_message_size)
        except HTTPClientError as exc:
            raise ApiError(exc.code if 400 <= exc.code < 600 else 502,
                           f"the task's server refused the WebSocket: HTTP {exc.code}") from None
        except (OSError, iostream.StreamClosedError, TimeoutError, tornado.websocket.WebSocketError) as exc:
            raise ApiError(502, f"could not open a WebSocket to port {self.target.port} of task "
                                f"{self.target.rec.id}: {exc}") from None

    def check_origin(self, origin: str) -> bool:
        return True  # checked in prepare (same origin for the cookie; a token needs none)

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        chosen = self.backend_ws.selected_subprotocol if self.backend_ws is not None else None
        return chosen if chosen in subprotocols else None

    def open(self, *args: Any, **kwargs: Any) -> None:
        self._pump = asyncio.ensure_future(self._from_backend())

    async def _from_backend(self) -> None:
        ws = self.backend_ws
        assert ws is not None
        while True:
            msg = await ws.read_message()
            if msg is None:
                break
            try:
                await self.write_message(msg, binary=isinstance(msg, bytes))
            except tornado.websocket.WebSocketClosedError:
                ws.close()
                return
        self.close(*_close_args(ws.close_code, ws.close_reason))

    async def on_message(self, message: str | bytes) -> None:
        if self.backend_ws is None:
            return
        try:
            await self.backend_ws.write_message(message, binary=isinstance(message, bytes))
        except tornado.websocket.WebSocketClosedError:
            self.close(1011, "the task's server went away")

    def on_close(self) -> None:
        if self.backend_ws is not None:
            self.backend_ws.close(*_close_args(self.close_code, self.close_reason))


for _method in EXTRA_METHODS:  # WebDAV and the like: relayed as any other method
    setattr(ProxyHandler, _method.lower(), ProxyHandler.options)


class AbsoluteProxyHandler(ProxyHandler):
    """``tasks/ID/proxy/absolute/PORT/...``: the task's server gets the whole path."""

    openapi: ClassVar[dict[str, dict[str, Any]]] = {
        "get": {"summary": "As tasks/ID/proxy/PORT/..., but the task's server gets the whole path (start it with "
                           "this path as its prefix, e.g. tensorboard --path_prefix).",
                "errors": {"409": "the task is not running"}},
    }


def _close_args(code: int | None, reason: str | None) -> tuple[int | None, str | None]:
    """A close code that may be sent on (1005, 1006 and 1015 only describe a connection; never sent)."""
    if code is None or code in (1004, 1005, 1006, 1015) or not 1000 <= code <= 4999:
        return None, None
    return code, (reason or "")[:120]


class PortsHandler(ApiHandler):
    openapi = {
        "get": {"summary": "A task's web ports: those its spec declares, its TensorBoard's, and those its processes "
                           "listen on now, each with its proxy URL.",
                "response": "application/json"},
    }
    SUFFIX = re.compile(r"api/tasks/\d+/ports/?$")

    async def get(self, task_id: str) -> None:
        rec = self.visible_task(task_id)
        spec_ports = [int(p) for p in (rec.spec.get("ports") or []) if isinstance(p, int)]
        state = rec.executor_state or {}
        tb = state.get("tensorboard_port")
        tb_port = tb if isinstance(tb, int) and not isinstance(tb, bool) and 0 < tb < 65536 else None
        listening: set[int] = set()
        if rec.status == TaskStatus.RUNNING:
            placement = Placement.model_validate(rec.placement) if rec.placement else None
            try:
                listening = set(await self.ctx.controller.executor.listening_ports(rec.id, state, placement))
            except Exception as exc:  # unknown is not "none": say nothing rather than fail the list
                log.info("listing ports of task %d failed: %s", rec.id, exc)
        base = self.SUFFIX.sub("", self.request.path)
        declared = set(spec_ports) | ({tb_port} if tb_port else set())
        ports = [{"port": p, "declared": p in declared, "listening": p in listening,
                  "label": "TensorBoard" if p == tb_port else None, "url": f"{base}tasks/{rec.id}/proxy/{p}/"}
                 for p in sorted(declared | listening)]
        self.write_json({"task_id": rec.id, "ports": ports})


class TunnelHandler(tornado.websocket.WebSocketHandler):
    """``api/tasks/ID/ports/PORT/tunnel``: raw TCP to a task's port in binary WebSocket frames (``tcloud
    port-forward``): one TCP connection per WebSocket, closed when either side closes."""

    public: ClassVar[bool] = False
    openapi: ClassVar[dict[str, dict[str, Any]]] = {
        "get": {"summary": "WebSocket: a TCP connection to a running task's port; binary frames carry its bytes "
                           "both ways. Same rules as the proxy (owner and admins, the task must serve the port).",
                "errors": {"409": "the task is not running, or the port is its TensorBoard (reached through "
                                  "tasks/ID/proxy/PORT/ only)"}},
    }

    def initialize(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.tcp: iostream.IOStream | None = None
        self.identity: Identity | None = None
        self._pump: asyncio.Task[None] | None = None

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = exc.message if isinstance(exc, ApiError) else self._reason
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(_error_body(status_code, message, exc.errors if isinstance(exc, ApiError) else None))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if not isinstance(value, tornado.web.HTTPError):
            log.error("Uncaught exception %s", self.request.path, exc_info=(typ, value, tb))

    def _request_summary(self) -> str:
        return f"{self.request.method} {self.request.path} ({self.request.remote_ip})"

    def check_xsrf_cookie(self) -> None:
        """Checked in :meth:`check_origin` (a WebSocket made with the cookie must come from this site)."""

    async def prepare(self) -> None:
        try:
            self.identity = await self.ctx.auth.authenticate(self)
        except Denied as exc:
            raise ApiError(exc.status, exc.message) from None

    def check_origin(self, origin: str) -> bool:
        if self.identity is not None and self.identity.via != "hub-cookie":
            return True
        return super().check_origin(origin)

    async def get(self, *args: Any, **kwargs: Any) -> None:
        assert self.identity is not None
        target = await admit(self.ctx, self.identity, str(kwargs.get("id", "")), str(kwargs.get("port", "")))
        if tensorboard_prefix(target.rec.executor_state, target.port):
            raise ApiError(409, f"port {target.port} is task {target.rec.id}'s TensorBoard, which answers only "
                                f"through the proxy (tcloud open {target.rec.id}): raw bytes cannot carry its "
                                "secret path", [{"field": "port", "message": "the task's TensorBoard"}])
        try:
            self.tcp = await asyncio.wait_for(TCPClient().connect(target.host, target.port, af=socket.AF_INET),
                                                 CONNECT_TIMEOUT)
        except (OSError, iostream.StreamClosedError, TimeoutError) as exc:
            raise ApiError(502, f"could not connect to port {target.port} of task {target.rec.id}: {exc}") from None
        self.tcp.set_nodelay(True)
        await super().get(*args, **kwargs)

    def open(self, *args: Any, **kwargs: Any) -> None:
        self._pump = asyncio.ensure_future(self._from_task())

    async def _from_task(self) -> None:
        assert self.tcp is not None
        try:
            while True:
                data = await self.tcp.read_bytes(CHUNK, partial=True)
                await self.write_message(data, binary=True)
        except (iostream.StreamClosedError, tornado.websocket.WebSocketClosedError):
            pass
        self.close(1000, "the task's side closed")

    async def on_message(self, message: str | bytes) -> None:
        if self.tcp is None:
            return
        if isinstance(message, str):
            self.close(1003, "binary frames only")
            return
        try:
            await self.tcp.write(message)
        except iostream.StreamClosedError:
            self.close(1000, "the task's side closed")

    def on_close(self) -> None:
        if self.tcp is not None:
            self.tcp.close()


ROUTES: list[tuple[str, Any]] = [
    (r"/api/tasks/(\d+)/ports", PortsHandler),
    (r"/api/tasks/(?P<id>\d+)/ports/(?P<port>\d+)/tunnel", TunnelHandler),
    (r"/tasks/(?P<id>\d+)/proxy/absolute/(?P<port>\d+)(?P<path>/.*|)", AbsoluteProxyHandler),
    (r"/tasks/(?P<id>\d+)/proxy/(?P<port>\d+)(?P<path>/.*|)", ProxyHandler),
]
