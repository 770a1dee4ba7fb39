"""Request handling shared by every API handler: identity, JSON bodies, JSON errors.

Invariants: every response of the API, errors included, is JSON (except log
streams and archives); a request without a valid token gets 401 before any
handler code runs; a task that is not the caller's is answered 404 (as if it
did not exist) unless the caller is an admin.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import tornado.web
from pydantic import BaseModel

from tacc_hub.schema import SpecError
from tacc_hub.snapshot import CodeStore
from tacc_hub.store import Store, TaskRecord

from .auth import Authenticator, Denied, Identity
from .controller import Controller

log = logging.getLogger("tacc_hub.api")


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


class ApiError(tornado.web.HTTPError):
    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(status, reason=None)
        self.message = message
        self.errors = errors or []


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

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")

    async def prepare(self) -> None:
        if self.public:
            return
        try:
            self.identity = await self.ctx.auth.authenticate(self)
        except Denied as exc:
            raise ApiError(exc.status, exc.message) from None
        self.user, self.admin = self.identity.user, self.identity.admin

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
        super().log_exception(typ, value, tb)

    @staticmethod
    def spec_error(exc: SpecError, status: int = 422) -> ApiError:
        return ApiError(status, str(exc)[:2000], exc.as_json())

    def require_admin(self) -> None:
        """403 unless the caller is an admin."""
        if not self.admin:
            raise ApiError(403, "this endpoint is for admins only")

    def body_json(self) -> Any:
        try:
            return json.loads(self.request.body or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, f"request body is not valid JSON: {exc}") from None

    def int_arg(self, name: str, default: int, lo: int, hi: int) -> int:
        raw = self.get_query_argument(name, None)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ApiError(400, f"query parameter {name} must be a whole number", [
                {"field": name, "message": "not a whole number"}]) from None
        if not lo <= value <= hi:
            raise ApiError(400, f"query parameter {name} must be between {lo} and {hi}", [
                {"field": name, "message": f"out of range {lo}..{hi}"}])
        return value

    def visible_task(self, task_id: str) -> TaskRecord:
        try:
            tid = int(task_id)
        except ValueError:
            raise ApiError(404, f"no task {task_id[:32]!r}") from None
        rec = self.ctx.store.get(tid)
        if rec is None or (rec.owner != self.user and not self.admin):
            raise ApiError(404, f"no task {tid}")
        return rec
