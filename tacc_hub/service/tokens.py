"""Token endpoints: admins make, list and revoke API tokens; every user lists and revokes their own.

Invariants: a token is shown once, in the answer to the ``POST`` that made it; nothing else ever
shows a token or its hash. ``/api/admin/tokens...`` answers 403 to a non-admin before it reads
or writes anything. ``/api/tokens...`` are the caller's own tokens only: another user's token id
is answered 404, as an unknown id (admins too: they use the admin routes). Every field is checked
(400 naming it) before anything is stored. A revocation empties this process's token cache, so
that the revoked token is refused on the very next request. Making and revoking a token is recorded in the
audit trail (token_create, token_revoke: its id, user, admin flag, note and expiry, never the token).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from tacc_hub.schema import SpecError
from tacc_hub.store import TokenInfo

from .audit import record
from .auth import TokenFieldError, check_user, issue_token
from .base import ApiError, ApiHandler

MAX_ID = 2**63 - 1


class TokenOut(BaseModel):
    """One API token as stored (never the token itself)."""

    id: int
    user: str
    admin: bool
    state: str = Field(description="active, expired or revoked")
    note: str | None = None
    created_at: float
    last_used_at: float | None = Field(None, description="Recorded coarsely (at most once a minute).")
    expires_at: float | None = Field(None, description="Seconds since the epoch; null: never expires.")
    revoked_at: float | None = None


class TokenListOut(BaseModel):
    tokens: list[TokenOut]


class TokenCreatedOut(TokenOut):
    token: str = Field(description="The token: shown this once only; send it as Authorization: token TOKEN.")


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: StrictStr = Field(description="Whose token: letters, digits, '.', '_', '@', '-' (at most 64).")
    admin: StrictBool = Field(False, description="The token may see and change every user's tasks and quotas.")
    expires: StrictStr | StrictInt | StrictFloat | None = Field(
        None, description="Lifetime: \"30d\", \"12h\", \"90m\", \"45s\", \"2w\", a number of seconds, or \"never\" "
                          "(the default).")
    note: StrictStr | None = Field(None, description="What the token is for (at most 255 characters, no control "
                                                     "characters).")


def token_out(info: TokenInfo, now: float | None = None) -> dict[str, Any]:
    return {"id": info.id, "user": info.user, "admin": info.admin, "state": info.state(time.time() if now is None
                                                                                      else now),
            "note": info.note, "created_at": info.created_at, "last_used_at": info.last_used_at,
            "expires_at": info.expires_at, "revoked_at": info.revoked_at}


def audited(info: TokenInfo, now: float | None = None) -> dict[str, Any]:
    """A token as the audit trail keeps it: who it is for, what it may do, its note and expiry; never the token
    (nor its hash)."""
    return {"user": info.user, "admin": info.admin, "note": info.note, "expires_at": info.expires_at,
            "state": info.state(time.time() if now is None else now)}


def _field_error(exc: TokenFieldError, status: int = 400) -> ApiError:
    return ApiError(status, str(exc)[:2000], [{"field": exc.field, "message": exc.message[:500]}])


def _token_id(raw: str) -> int:
    """The id in a path (digits only, by the route); too long or too large is an unknown id (404)."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > MAX_ID:
        raise ApiError(404, f"no token {raw[:32]}")
    return int(raw)


_ADMIN_ERRORS = {"400": "invalid field; `errors` names it", "403": "not an admin"}
_LIST_PARAMS = {"all": "1: also revoked and expired tokens"}


class _TokenHandler(ApiHandler):
    def _include_inactive(self) -> bool:
        raw = self.get_query_argument("all", "0").strip().lower()
        if raw in ("1", "true", "yes"):
            return True
        if raw in ("", "0", "false", "no"):
            return False
        raise ApiError(400, "query parameter all must be 1 or 0", [{"field": "all", "message": "not 1 or 0"}])

    def _list(self, user: str | None) -> None:
        infos = self.ctx.store.list_tokens(user, include_inactive=self._include_inactive())
        now = time.time()
        self.write_json({"tokens": [token_out(i, now) for i in infos]})

    def _revoke(self, info: TokenInfo) -> None:
        after = self.ctx.store.revoke_token(info.id)
        forget = getattr(self.ctx.auth, "tokens_changed", None)
        if forget is not None:
            forget()
        if info.revoked_at is None and after is not None:  # revoking a revoked token changes nothing
            record(self, "token_revoke", f"token:{info.id}", before=audited(info), after=audited(after))
        self.write_json(token_out(after or info))


class AdminTokensHandler(_TokenHandler):
    openapi = {
        "get": {"summary": "Admin: API tokens (active ones; all=1: also revoked and expired), oldest first; "
                           "never the tokens themselves.",
                "params": {"user": "only this user's", **_LIST_PARAMS}, "response": TokenListOut,
                "errors": _ADMIN_ERRORS},
        "post": {"summary": "Admin: make an API token for a user; the answer holds the token, shown this once.",
                 "request": TokenIn, "response": TokenCreatedOut, "status": 201, "errors": _ADMIN_ERRORS},
    }

    def get(self) -> None:
        self.require_admin()
        user = self.get_query_argument("user", None)
        if user is not None:
            try:
                user = check_user(user)
            except TokenFieldError as exc:
                raise _field_error(exc) from None
        self._list(user)

    def post(self) -> None:
        self.require_admin()
        try:
            body = TokenIn.model_validate(self.body_json())
        except ValidationError as exc:
            err = SpecError.from_validation(exc, model=TokenIn)
            raise ApiError(400, f"invalid token request: {err}"[:2000], err.as_json()) from None
        try:
            token, token_id = issue_token(self.ctx.store, body.user, admin=body.admin, note=body.note,
                                          expires=body.expires)
        except TokenFieldError as exc:
            raise _field_error(exc) from None
        info = self.ctx.store.get_token(token_id)
        if info is None:  # revoked and gone between two statements: not for a fresh token
            raise ApiError(500, "the new token was not found")
        record(self, "token_create", f"token:{info.id}", before=None, after=audited(info))
        self.write_json({**token_out(info), "token": token}, status=201)


class AdminTokenHandler(_TokenHandler):
    openapi = {"delete": {"summary": "Admin: revoke a token (it is refused from the next request on); answers "
                                     "the token as it now stands. Revoking a revoked token changes nothing.",
                          "response": TokenOut, "errors": {**_ADMIN_ERRORS, "404": "no such token"}}}

    def delete(self, raw_id: str) -> None:
        self.require_admin()
        info = self.ctx.store.get_token(_token_id(raw_id))
        if info is None:
            raise ApiError(404, f"no token {raw_id[:32]}")
        self._revoke(info)


class MyTokensHandler(_TokenHandler):
    openapi = {"get": {"summary": "Your API tokens (active ones; all=1: also revoked and expired), oldest first; "
                                  "never the tokens themselves.", "params": _LIST_PARAMS, "response": TokenListOut,
                       "errors": {"400": "invalid query parameter"}}}

    def get(self) -> None:
        self._list(self.user)


class MyTokenHandler(_TokenHandler):
    openapi = {"delete": {"summary": "Revoke one of your API tokens (another user's id is answered 404); answers "
                                     "the token as it now stands.", "response": TokenOut,
                          "errors": {"404": "no such token of yours"}}}

    def delete(self, raw_id: str) -> None:
        info = self.ctx.store.get_token(_token_id(raw_id))
        if info is None or info.user != self.user:
            raise ApiError(404, f"no token {raw_id[:32]}")
        self._revoke(info)


TOKEN_ROUTES: list[tuple[str, Any]] = [
    (r"/api/admin/tokens", AdminTokensHandler),
    (r"/api/admin/tokens/(\d+)", AdminTokenHandler),
    (r"/api/tokens", MyTokensHandler),
    (r"/api/tokens/(\d+)", MyTokenHandler),
]
