"""Request handling shared by every API handler: identity, JSON bodies, JSON errors.

Invariants: every response of the API, errors included, is JSON (except log
streams and archives); a request without a valid token gets 401 before any
handler code runs; a task that is not the caller's is answered 404 (as if it
did not exist) unless the caller is an admin.

Bodies are streamed (``tornado.web.stream_request_body``), so that nothing of a body is read
before the request is judged: a ``Content-Length`` above the endpoint's limit gets 413, and a
caller without a valid token 401, from the headers alone, and the connection is then closed
without reading the body. A chunked body is cut off at the same limit. CPU-heavy work on a body
(YAML, large JSON, archive checks) runs off the event loop (:mod:`.offload`).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import tornado.web
from pydantic import BaseModel
from tornado.http1connection import HTTP1Connection
from tornado.log import app_log

from tacc_hub.schema import SpecError
from tacc_hub.schema.jsonsafe import load_json
from tacc_hub.snapshot import DEFAULT_LIMITS, ArchiveLimits, CodeStore
from tacc_hub.store import Store, TaskRecord

from .auth import Authenticator, Denied, Identity
from .controller import Controller
from .offload import Busy, HeavyWork
from .requestid import HEADER as REQUEST_ID_HEADER
from .requestid import REQUEST_ID, from_header
from .running_settings import RunningSettings

if TYPE_CHECKING:
    from tacc_hub.notify import Notifier

    from .metrics import Metrics

T = TypeVar("T")

log = logging.getLogger("tacc_hub.api")

SMALL_BODY_BYTES = 64 * 1024
"""Largest body of a GET, HEAD or DELETE, and of any request to a public endpoint (they need none)."""
MAX_ID = 2**62
"""Largest id (task, token) the API looks up; a larger one is answered 404 without a query (the
databases hold 64-bit integers: 2**63 would not even be a valid parameter)."""


@dataclass
class ServiceContext:
    store: Store
    controller: Controller
    auth: Authenticator
    code_store: CodeStore
    max_code_bytes: int
    max_body_bytes: int
    log_poll_interval: float
    quota_period: str = "month"  # the accounting period of GPU-hour budgets: day, week or month
    quotas_changed: Callable[[], None] = lambda: None  # called after every quota or membership change
    heavy: HeavyWork = field(default_factory=HeavyWork)  # CPU-heavy request work, off the event loop
    archive_limits: ArchiveLimits = DEFAULT_LIMITS  # caps on what an uploaded code snapshot unpacks to
    running: RunningSettings = field(default_factory=RunningSettings)  # ports, exec, time, GPU samples
    metrics: Metrics | None = None  # Prometheus series (metrics.py); None: none kept, /metrics answers 404
    notifier: Notifier | None = None  # notifications of task events (tacc_hub/notify); None: off


def _raise(exc: BaseException, *args: object, **kwargs: object) -> None:
    raise exc


class ApiError(tornado.web.HTTPError):
    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(status, reason=None)
        self.message = message
        self.errors = errors or []


@tornado.web.stream_request_body
class ApiHandler(tornado.web.RequestHandler):
    """Base of every API handler. ``openapi`` documents the handler's methods where they are declared."""

    openapi: ClassVar[dict[str, dict[str, Any]]] = {}
    public: ClassVar[bool] = False
    accepts_url_token: ClassVar[bool] = False  # ?token= is read only where a browser cannot send a header (SSE)
    ctx: ServiceContext
    user: str
    admin: bool
    identity: Identity

    def initialize(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self._chunks: list[bytes] = []
        self._received = 0
        self._body: bytes | None = None
        self._limit = self.body_limit()
        self._set_max_body(self._limit)  # a longer body closes the connection, whatever the method

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header(REQUEST_ID_HEADER, self.request_id)

    @functools.cached_property
    def request_id(self) -> str:
        """This request's id (:mod:`.requestid`): answered in X-Request-Id, on its log lines and audit rows."""
        return from_header(self.request.headers.get(REQUEST_ID_HEADER))

    def body_limit(self) -> int:
        """Largest body this request may carry, in bytes: ``max_body_bytes`` (task specs, quota changes) for a
        POST, PUT or PATCH to an endpoint that needs a token; 64 KiB for other methods and public endpoints."""
        if self.public or self.request.method not in ("POST", "PUT", "PATCH"):
            return SMALL_BODY_BYTES
        return self.ctx.max_body_bytes

    async def prepare(self) -> None:
        REQUEST_ID.set(self.request_id)  # this request's coroutine only: its log lines and audit rows
        limit = self._limit
        try:
            declared = int(self.request.headers.get("Content-Length", "0").split(",")[0])
        except ValueError:
            declared = 0  # tornado answers a non-numeric Content-Length itself, before the body
        if declared > limit:
            message = f"request body of {declared} bytes is larger than the {limit} bytes this endpoint accepts"
            self._refuse_body(ApiError(413, message, [{"field": "body", "message": f"larger than {limit} bytes"}]))
            return
        if self.public:
            return
        try:
            self.identity = await self.ctx.auth.authenticate(self)
        except Denied as exc:
            self._refuse_body(ApiError(exc.status, exc.message))
            return
        self.user, self.admin = self.identity.user, self.identity.admin

    def _refuse_body(self, exc: ApiError | None = None) -> None:
        """Answer the request with ``exc`` without using its body (with ``exc=None``: only drop the body).

        Of a large or chunked body nothing more is read: ``exc`` is raised now and the connection closes
        after the answer. A small body (or none) is read and dropped first, and ``exc`` raised in place of
        the handler's method, so that the connection stays usable: closing it with unread bytes would
        reset it, and a keep-alive client would lose its next request.
        """
        self._received = -1  # data_received drops whatever arrives
        headers = self.request.headers
        try:
            declared = int(headers.get("Content-Length", "0").split(",")[0])
        except ValueError:
            declared = -1
        small = 0 <= declared <= SMALL_BODY_BYTES and "Transfer-Encoding" not in headers
        if small:
            if exc is not None:
                setattr(self, self.request.method.lower(), functools.partial(_raise, exc))
            return
        self._set_max_body(0)
        if exc is not None:
            raise exc

    def _set_max_body(self, size: int) -> None:
        connection = self.request.connection
        if isinstance(connection, HTTP1Connection):
            connection.set_max_body_size(size)

    def data_received(self, chunk: bytes) -> None:
        if self._received < 0:
            return
        self._received += len(chunk)
        if self._received > self._limit:  # tornado closes the connection too; keep nothing meanwhile
            self._refuse_body()
            self._chunks = []
            return
        self._chunks.append(chunk)

    @property
    def body(self) -> bytes:
        """The request body (read in full before the handler's method runs)."""
        if self._body is None:
            self._body = b"".join(self._chunks)
            self._chunks = []
        return self._body

    async def offload(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` off the event loop (:class:`~.offload.HeavyWork`); 429/503 with Retry-After when busy."""
        try:
            return await self.ctx.heavy.run(self.user, fn, *args)
        except Busy as exc:
            self.set_header("Retry-After", str(exc.retry_after))
            raise ApiError(exc.status, exc.message) from None

    def _request_summary(self) -> str:
        # tornado's own log lines (warnings, 500s) name the request: the path only, never the query (?token=).
        return f"{self.request.method} {self.request.path} ({self.request.remote_ip})"

    def write_json(self, body: BaseModel | dict[str, Any] | list[Any], status: int = 200) -> None:
        self.set_status(status)
        if isinstance(body, BaseModel):
            self.finish(body.model_dump_json())
        else:
            self.finish(json.dumps(body))

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
        self.finish(json.dumps({"status": status_code, "message": message, "errors": errors}))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, tornado.web.HTTPError):
            return  # client errors are answered, not logged as failures
        # tornado's own line adds repr(request), whose URI may hold ?token=: the path only
        app_log.error("Uncaught exception %s", self._request_summary(), exc_info=(typ, value, tb))

    @staticmethod
    def spec_error(exc: SpecError, status: int = 422) -> ApiError:
        return ApiError(status, str(exc)[:2000], exc.as_json())

    def require_admin(self) -> None:
        """403 unless the caller is an admin."""
        if not self.admin:
            raise ApiError(403, "this endpoint is for admins only")

    def body_json(self) -> Any:
        """The body as JSON (duplicate keys, NaN and deep nesting refused); 400 naming what is wrong."""
        try:
            return load_json(self.body or b"null", "request body")
        except SpecError as exc:
            raise ApiError(400, str(exc)[:2000], exc.as_json()) from None

    def int_arg(self, name: str, default: int, lo: int, hi: int) -> int:
        """Query parameter ``name`` as an integer in ``lo..hi`` (ASCII digits only), else 400 naming it."""
        raw = self.get_query_argument(name, None)
        if raw is None:
            return default
        digits = raw[1:] if raw.startswith("-") else raw
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 20):
            raise ApiError(400, f"query parameter {name} must be a whole number", [
                {"field": name, "message": "not a whole number"}])
        value = int(raw)
        if not lo <= value <= hi:
            raise ApiError(400, f"query parameter {name} must be between {lo} and {hi}", [
                {"field": name, "message": f"out of range {lo}..{hi}"}])
        return value

    def visible_task(self, task_id: str) -> TaskRecord:
        tid = int(task_id) if task_id.isascii() and task_id.isdigit() and len(task_id) <= 18 else 0
        if not 0 < tid <= MAX_ID:
            raise ApiError(404, f"no task {task_id[:32]!r}")
        rec = self.ctx.store.get(tid)
        if rec is None or (rec.owner != self.user and not self.admin):
            raise ApiError(404, f"no task {tid}")
        return rec
