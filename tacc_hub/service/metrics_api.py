"""``GET /metrics``: the Prometheus exposition, for callers holding the metrics scope.

Who may read it (as JupyterHub guards its own ``/hub/metrics`` with ``read:metrics``):
- a JupyterHub token, of a user or of a service (Prometheus runs as a hub service, see
  docs/metrics.md), whose scopes include ``custom:tacc:metrics`` or ``custom:tacc:admin``;
- a browser with the hub's login cookie of this service, when that grants one of those scopes;
- one of this service's own admin tokens (``tacc-hub token NAME --admin``; standalone mode).

No credentials, or a token nobody knows: 401. A valid token without the scope (a user's
``custom:tacc:tasks`` token, a non-admin service token): 403. The token is read from
``Authorization: token T`` or ``Authorization: Bearer T`` (what Prometheus sends with
``authorization: {credentials_file: ...}``), never from the URL. Unlike the rest of the API, a hub
*service* token is accepted here: metrics name no one's tasks.
"""

from __future__ import annotations

from typing import Any

import tornado.web
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from .auth import Denied, TokenAuth, refused_message, request_token, url_token_ignored
from .base import ApiError, ApiHandler
from .scopes import ADMIN_SCOPE, METRICS_SCOPE

METRICS_SCOPES = frozenset({METRICS_SCOPE, ADMIN_SCOPE})


def _scoped(model: dict[str, Any], how: str) -> None:
    """Nothing when the hub's model of the caller holds a metrics scope, else Denied(403)."""
    scopes = {str(s) for s in model.get("scopes", []) or []}
    if scopes & METRICS_SCOPES:
        return
    kind = str(model.get("kind", "user"))
    raise Denied(403, f"this {how} of hub {kind} {str(model.get('name'))[:64]!r} lacks the scope {METRICS_SCOPE} "
                      f"(or {ADMIN_SCOPE}) that /metrics needs")


async def authorize_metrics(auth: Any, handler: tornado.web.RequestHandler) -> None:
    """Let the caller read the metrics, or raise Denied: 401 (nobody identified), 403 (no metrics scope)."""
    ignored = url_token_ignored(handler)  # a ?token= is never read here; the 401 says so
    token = request_token(handler)
    tokens: TokenAuth | None = auth if isinstance(auth, TokenAuth) else getattr(auth, "tokens", None)
    hub_auth = getattr(auth, "hub_auth", None)
    if token:
        grant = tokens.lookup(token) if tokens is not None else None
        if grant is not None:
            if grant.admin:
                return
            raise Denied(403, f"the token of {grant.user!r} is not an admin's; /metrics needs an admin token of this "
                              f"service or a hub token with the scope {METRICS_SCOPE}")
        if hub_auth is not None:
            model = await hub_auth.user_for_token(token, session_id=hub_auth.get_session_id(handler), sync=False)
            if model is None:
                raise Denied(401, "the token is neither this service's nor valid on the hub")
            _scoped(model, "token")
            return
        raise Denied(401, "a valid admin token is required (Authorization: Bearer TOKEN)")
    if hub_auth is not None:
        model = await hub_auth.get_user(handler, sync=False)
        if model is not None:
            _scoped(model, "login")
            return
    raise Denied(401, refused_message(ignored, f"a token with the scope {METRICS_SCOPE} is required "
                                               "(Authorization: Bearer TOKEN)"))


class MetricsHandler(ApiHandler):
    public = True  # its own authorization (authorize_metrics), not the API's identity of a user
    openapi = {"get": {"summary": "Prometheus metrics (text exposition format): tasks, queue, GPUs, latencies, "
                                  "executor commands. Needs a hub token with the scope custom:tacc:metrics (or "
                                  "custom:tacc:admin), or an admin token of this service. See docs/metrics.md.",
                       "response": "text/plain",
                       "errors": {"401": "no valid token", "403": "a valid token without the metrics scope"}}}

    async def prepare(self) -> None:
        await super().prepare()  # public: the body limit only
        if self._finished:
            return
        try:
            await authorize_metrics(self.ctx.auth, self)
        except Denied as exc:
            self._refuse_body(ApiError(exc.status, exc.message))

    def get(self) -> None:
        metrics = self.ctx.metrics
        if metrics is None:
            raise ApiError(404, "this service keeps no metrics")
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(generate_latest(metrics.registry))
