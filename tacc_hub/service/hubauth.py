"""Hub mode: every caller is identified by JupyterHub (the service runs as a hub-managed service).

Invariants:
- A request carries a token (``Authorization: token T``: the CLI, notebooks, the spawner) or the
  hub's OAuth cookie of this service (a browser that went through ``oauth_callback``). Tokens are
  looked up first among the service's own (``tacc-hub token``: robots, scripts), then asked of the
  hub (``GET /hub/api/user``, cached ``cache_max_age`` seconds by :class:`HubOAuth`).
- Permissions are JupyterHub custom scopes: ``custom:tacc:tasks`` (one's own tasks) and
  ``custom:tacc:admin`` (everything). A hub admin holding either scope is one of our admins. A
  caller the hub knows but whose token carries neither scope gets 403, never 401.
- The hub's answer is trusted only over the hub API URL the hub gave us (``JUPYTERHUB_API_URL``).
- A token in the URL (``?token=``) is read only where the handler accepts it (the log stream), by
  :func:`~tacc_hub.service.auth.request_token`; the hub client is never let read one itself (its
  ``allow_token_in_url`` is turned off, and so is its exception for ``Sec-Fetch-Mode: websocket``,
  a header any script can send).
"""

from __future__ import annotations

import tornado.web
from jupyterhub.services.auth import HubOAuth

from .auth import Denied, Identity, TokenAuth, refused_message, request_token, url_token_ignored
from .scopes import ADMIN_SCOPE, TASKS_SCOPE


def identity_of(model: dict[str, object], via: str) -> Identity:
    """Map a hub user model (name, admin, scopes) to our identity, or refuse it (403)."""
    if model.get("kind", "user") != "user":
        raise Denied(403, f"hub {model.get('kind')} {model.get('name')!r} is not a user; tasks belong to users")
    scopes = {str(s) for s in model.get("scopes", []) or []}  # type: ignore[attr-defined]
    name = str(model["name"])
    if ADMIN_SCOPE in scopes:
        return Identity(name, True, via)
    if TASKS_SCOPE in scopes:
        return Identity(name, bool(model.get("admin")), via)
    raise Denied(403, f"this hub token of {name!r} lacks the scope {TASKS_SCOPE} (or {ADMIN_SCOPE}); "
                      "ask for a token with it on the hub's token page")


class HubModeAuth:
    """:class:`~tacc_hub.service.auth.Authenticator` for a service under JupyterHub."""

    def __init__(self, tokens: TokenAuth, hub_auth: HubOAuth | None = None) -> None:
        self.tokens = tokens
        self.hub_auth = hub_auth or HubOAuth(cache_max_age=30)
        self.hub_auth.allow_token_in_url = False
        # HubAuth reads ?token= for any request saying Sec-Fetch-Mode: websocket; our URL tokens come
        # from request_token only (this instance attribute shadows the method).
        self.hub_auth._get_token_url = _no_url_token

    def tokens_changed(self) -> None:
        """One of our tokens was revoked in this process: forget the cached lookups."""
        self.tokens.tokens_changed()

    async def authenticate(self, handler: tornado.web.RequestHandler) -> Identity:
        ignored = url_token_ignored(handler)  # before request_token cuts it out of the URI
        token = request_token(handler)
        if token:
            who = self.tokens.identify(token)
            if who is not None:
                return Identity(who[0], who[1], "token")
            model = await self.hub_auth.user_for_token(token, session_id=self.hub_auth.get_session_id(handler),
                                                       sync=False)
            if model is None:
                raise Denied(401, "the token is neither this service's nor valid on the hub")
            return identity_of(model, "hub-token")
        model = await self.hub_auth.get_user(handler, sync=False)
        if model is None and handler.get_cookie(self.hub_auth.cookie_name) \
                and handler.request.method not in ("GET", "HEAD", "OPTIONS"):
            raise Denied(403, "a change made with the hub's login cookie must carry the X-XSRFToken header "
                              "(the _xsrf cookie's value); scripts should send a token instead")
        if model is None:
            raise Denied(401, refused_message(ignored, "log in through the hub (open this service from the hub's "
                                                       "Services menu) or send a token: Authorization: token TOKEN"))
        return identity_of(model, "hub-cookie")


def _no_url_token(handler: tornado.web.RequestHandler) -> str:
    return ""
