"""Quota endpoints: a user's own quota and usage; admins' quotas and group memberships.

Invariants: every ``/api/admin/...`` endpoint answers 403 to a caller who is not an admin,
before it reads or writes anything. Names in paths and bodies are checked by the store
(:mod:`tacc_hub.store.quotas`) and a bad one is a 400 naming the field; nothing is written
then. Every successful change calls ``ctx.quotas_changed()`` so the live scheduler reloads
quotas, and is recorded in the audit trail (quota_set, quota_delete, group_set, group_clear: see
:mod:`.audit`). Usage is GPU-hours within the current accounting period (``TaccHub.quota_period``).
"""

from __future__ import annotations

import time
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tacc_hub.scheduler.policy import Limits
from tacc_hub.scheduler.quota import period_end, period_start, usage_by_group
from tacc_hub.schema import SpecError
from tacc_hub.store import DEFAULT_GROUP, QuotaError, QuotaRow
from tacc_hub.store.quotas import check_name

from .audit import record
from .base import ApiError, ApiHandler
from .models import GroupIn, GroupsOut, MembershipOut, MyQuotaOut, QuotaIn, QuotaListOut, QuotaOut

M = TypeVar("M", bound=BaseModel)

_ADMIN_ERRORS = {"400": "invalid name or body; `errors` names each field", "403": "not an admin"}
_ROW_ERRORS = {**_ADMIN_ERRORS, "404": "this user or group has no quota row"}


def _limits(lim: Limits) -> dict[str, Any]:
    return {"max_gpus": lim.max_gpus, "guaranteed_gpus": lim.guaranteed_gpus, "gpu_hours": lim.gpu_hours}


def _audited(row: QuotaRow | None) -> dict[str, Any] | None:
    """A quota row as the audit trail keeps it (its limits; who and when are the event's own)."""
    if row is None:
        return None
    return {"max_gpus": row.max_gpus, "guaranteed_gpus": row.guaranteed_gpus, "gpu_hours": row.gpu_hours}


def _quota_error(exc: QuotaError) -> ApiError:
    return ApiError(400, str(exc), [{"field": exc.field, "message": exc.message}])


def _parse(handler: ApiHandler, model: type[M]) -> M:
    try:
        return model.model_validate(handler.body_json())
    except ValidationError as exc:
        err = SpecError.from_validation(exc, model=model)
        raise ApiError(400, f"invalid {model.__name__} body: {err}"[:2000], err.as_json()) from None


class MyQuotaHandler(ApiHandler):
    openapi = {"get": {
        "summary": "Your quota: your group, the limits in force for you and your group (defaults applied), "
                   "GPU-hours used and left in the current accounting period.",
        "params": {"user": "admin: another user's"},
        "response": MyQuotaOut,
    }}

    def get(self) -> None:
        user = self.user
        wanted = self.get_query_argument("user", None)
        if wanted is not None and wanted != user:
            self.require_admin()
            try:
                user = check_name("user", wanted, default_ok=False, field="user")
            except QuotaError as exc:
                raise _quota_error(exc) from None
        store, period, now = self.ctx.store, self.ctx.quota_period, time.time()
        start, end = period_start(now, period), period_end(now, period)
        quotas = store.load_quotas()
        members = store.memberships()
        group = members.get(user, DEFAULT_GROUP)
        usage = store.gpu_seconds_by_owner(start, now)
        used = {"user": usage.get(user, 0.0) / 3600.0,
                "group": usage_by_group(usage, members).get(group, 0.0) / 3600.0}
        limits = {"user": quotas.user(user), "group": quotas.group(group)}
        left = {k: None if lim.gpu_hours is None else max(0.0, lim.gpu_hours - used[k]) for k, lim in limits.items()}
        self.write_json(MyQuotaOut.model_validate({
            "user": user, "group": group, "period": period, "period_start": start, "period_end": end,
            "limits": {k: _limits(v) for k, v in limits.items()},
            "used_gpu_hours": used, "remaining_gpu_hours": left,
        }))


class QuotasHandler(ApiHandler):
    openapi = {"get": {"summary": "Admin: every quota row (users, then groups; \"*\" is the default of its kind).",
                       "response": QuotaListOut, "errors": _ADMIN_ERRORS}}

    def get(self) -> None:
        self.require_admin()
        self.write_json({"quotas": [r.to_json() for r in self.ctx.store.list_quotas()]})


class QuotaHandler(ApiHandler):
    openapi = {
        "get": {"summary": "Admin: the quota row of one user or group (404 when it has none: the default "
                           "applies).", "response": QuotaOut, "errors": _ROW_ERRORS},
        "put": {"summary": "Admin: set (create or replace) the quota of a user or group; name \"*\" sets the "
                           "default for everyone not named. A limit left out or null is no limit.",
                "request": QuotaIn, "response": QuotaOut, "errors": _ADMIN_ERRORS},
        "delete": {"summary": "Admin: remove the quota row of a user or group (the default then applies); "
                              "answers the row removed.", "response": QuotaOut, "errors": _ROW_ERRORS},
    }

    def _name(self, kind: str, name: str) -> str:
        self.require_admin()
        try:
            return check_name(kind, name)
        except QuotaError as exc:
            raise _quota_error(exc) from None

    def get(self, kind: str, name: str) -> None:
        name = self._name(kind, name)
        row = self.ctx.store.get_quota(kind, name)
        if row is None:
            raise ApiError(404, f"no quota for {kind} {name} (the default applies)")
        self.write_json(row.to_json())

    def put(self, kind: str, name: str) -> None:
        name = self._name(kind, name)
        body = _parse(self, QuotaIn)
        old = self.ctx.store.get_quota(kind, name)
        try:
            row = self.ctx.store.set_quota(kind, name, max_gpus=body.max_gpus,
                                           guaranteed_gpus=body.guaranteed_gpus, gpu_hours=body.gpu_hours)
        except QuotaError as exc:
            raise _quota_error(exc) from None
        self.ctx.quotas_changed()
        record(self, "quota_set", f"quota:{kind}/{name}", before=_audited(old), after=_audited(row))
        self.write_json(row.to_json())

    def delete(self, kind: str, name: str) -> None:
        name = self._name(kind, name)
        row = self.ctx.store.get_quota(kind, name)
        if row is None or not self.ctx.store.delete_quota(kind, name):
            raise ApiError(404, f"no quota for {kind} {name}")
        self.ctx.quotas_changed()
        record(self, "quota_delete", f"quota:{kind}/{name}", before=_audited(row), after=None)
        self.write_json(row.to_json())


class GroupsHandler(ApiHandler):
    openapi = {"get": {"summary": "Admin: every user's group (users not listed are in group \"default\").",
                       "response": GroupsOut, "errors": _ADMIN_ERRORS}}

    def get(self) -> None:
        self.require_admin()
        self.write_json({"memberships": self.ctx.store.memberships()})


class UserGroupHandler(ApiHandler):
    openapi = {
        "put": {"summary": "Admin: put a user in a group (body {\"group\": \"lab-a\"}).",
                "request": GroupIn, "response": MembershipOut, "errors": _ADMIN_ERRORS},
        "delete": {"summary": "Admin: put a user back in group \"default\".", "response": MembershipOut,
                   "errors": _ADMIN_ERRORS},
    }

    def _set(self, user: str, group: str | None, action: str) -> None:
        old = self.ctx.store.memberships().get(user, DEFAULT_GROUP)
        try:
            self.ctx.store.set_group(user, group)
        except QuotaError as exc:
            raise _quota_error(exc) from None
        self.ctx.quotas_changed()
        record(self, action, f"user:{user}", before={"group": old},
               after={"group": group or DEFAULT_GROUP})
        self.write_json({"user": user, "group": group or DEFAULT_GROUP})

    def put(self, user: str) -> None:
        self.require_admin()
        body = _parse(self, GroupIn)
        self._set(user, body.group, "group_set")

    def delete(self, user: str) -> None:
        self.require_admin()
        self._set(user, None, "group_clear")
