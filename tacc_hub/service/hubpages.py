"""Browser pages of the service in hub mode: the OAuth callback, the landing, admin, "My usage" and error pages.

A browser reaches ``/services/tacc/`` from the hub's Services menu; with no cookie yet it is sent
through the hub's OAuth (``@authenticated`` → the hub's authorize URL → ``oauth_callback``), and
comes back with this service's cookie, which the JSON API then accepts as well (read-only methods;
unsafe ones need the hub's XSRF token, checked by :class:`HubOAuth`).

Look: every page extends ``templates/base.html`` (Jinja2, autoescaped), which links the hub's own
stylesheet (``{hub prefix}static/css/style.min.css``, Bootstrap 5 inside) and draws a navbar like
the hub's. We do not extend the hub's ``page.html``: it needs the hub's own template namespace
(``parsed_scopes``, ``services``, its static_url and JS bundle), which a service does not have.
Data on the admin and usage pages is fetched by their scripts from the JSON API, which checks the
caller again; text from the API is inserted as text, never HTML.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import tornado.web
from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated

from . import requestid
from .auth import Denied, Identity
from .hubauth import identity_of
from .tasks import _gpus_requested

if TYPE_CHECKING:
    from .base import ServiceContext

UI = Path(__file__).resolve().parent / "admin_ui"
TEMPLATES = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent / "templates"),
                               autoescape=True, undefined=jinja2.StrictUndefined)
STATIC_FILES = r"(tacc\.css|admin\.js|usage\.js|charts\.js|vendor/chart\.umd\.js)"
BADGES = {"pending": "secondary", "starting": "info", "running": "primary", "cancelling": "warning",
          "succeeded": "success", "failed": "danger", "cancelled": "dark", "lost": "danger"}


class Page(HubOAuthenticated, tornado.web.RequestHandler):
    """A browser page: the hub's OAuth cookie identifies the user (``@authenticated`` sends them to log in)."""

    def initialize(self, ctx: ServiceContext | None = None, prefix: str = "") -> None:
        self.ctx = ctx
        self.prefix = prefix

    @functools.cached_property
    def request_id(self) -> str:
        """This request's id (:mod:`.requestid`), as the API's: answered in X-Request-Id and on its log lines."""
        return requestid.from_header(self.request.headers.get(requestid.HEADER))

    def set_default_headers(self) -> None:
        self.set_header(requestid.HEADER, self.request_id)

    def prepare(self) -> None:
        requestid.REQUEST_ID.set(self.request_id)

    @staticmethod
    def identity(model: dict[str, Any]) -> Identity | None:
        """Our identity for the hub's user model; None when the user holds none of our scopes."""
        try:
            return identity_of(model, "hub-cookie")
        except Denied:
            return None

    def page(self, template: str, active: str, status: int = 200, **extra: Any) -> None:
        """Render ``template`` with what ``base.html`` needs (the user, the navbar's links, the hub's CSS)."""
        model: dict[str, Any] = self.current_user
        who = self.identity(model)
        ns = {"user": str(model.get("name", "")), "is_admin": bool(who and who.admin), "can_use": who is not None,
              "role": "admin" if who and who.admin else ("user" if who else "no tacc scope"),
              "hub_prefix": self.hub_auth.hub_prefix, "home": self.prefix + "/", "static": self.prefix + "/static/",
              "active": active, "xsrf": self.xsrf_token.decode(), "period": getattr(self.ctx, "quota_period", "month")}
        ns.update(extra)
        self.set_status(status)
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(TEMPLATES.get_template(template).render(**ns))

    def error_page(self, status: int, heading: str, message: str) -> None:
        self.page("error.html", "", status, heading=heading, message=message, code=status)


class HomePage(Page):
    """Who you are here, your recent tasks, and where the pages and the API are."""

    @tornado.web.authenticated
    def get(self) -> None:
        who = self.identity(self.current_user)
        rows: list[dict[str, Any]] = []
        total = 0
        if who is not None and self.ctx is not None:
            recs, total = self.ctx.store.list_tasks(who.user, None, 10, None)
            rows = [{"id": r.id, "name": r.name, "status": str(r.status), "badge": BADGES.get(str(r.status), "light"),
                     "gpus": _gpus_requested(r.spec),
                     "submitted": datetime.fromtimestamp(r.submitted_at, UTC).strftime("%Y-%m-%d %H:%M")}
                    for r in recs]
        self.page("home.html", "home", tasks=rows, total=total)


class AdminPage(Page):
    """The admin pages (usage, queue, cluster, quotas, audit): admins only, checked here and by every API they call."""

    @tornado.web.authenticated
    def get(self) -> None:
        who = self.identity(self.current_user)
        if who is None or not who.admin:
            name = str(self.current_user.get("name"))
            self.error_page(403, "Forbidden", f"The admin pages are for cluster admins; {name} is not one.")
            return
        self.page("admin.html", "admin")


class UsagePage(Page):
    """"My usage": the signed-in user's GPU-hours against the budget, per day, and recent tasks' efficiency."""

    @tornado.web.authenticated
    def get(self) -> None:
        if self.identity(self.current_user) is None:
            self.error_page(403, "Forbidden", "Your hub account holds none of tacc_hub's scopes.")
            return
        self.page("usage.html", "usage")


class NotFoundPage(Page):
    """Any other page under the service's prefix (not the API): a styled 404."""

    @tornado.web.authenticated
    def get(self, path: str = "") -> None:
        self.error_page(404, "Not found", "There is no such page here.")


def hub_routes(prefix: str, ctx: ServiceContext | None = None) -> list[Any]:
    """The pages' routes; the last one answers every other non-API path under ``prefix`` with the 404 page."""
    args = {"ctx": ctx, "prefix": prefix}
    return [(prefix + r"/?", HomePage, args), (prefix + r"/oauth_callback", HubOAuthCallbackHandler),
            (prefix + r"/admin/?", AdminPage, args), (prefix + r"/usage/?", UsagePage, args),
            (prefix + r"/static/" + STATIC_FILES, tornado.web.StaticFileHandler, {"path": str(UI)}),
            (prefix + r"/((?!api/|tasks/\d+/proxy/).*)", NotFoundPage, args)]
