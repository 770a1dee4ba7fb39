"""Browser pages of the service in hub mode: the OAuth callback and the landing page.

A browser reaches ``/services/tacc/`` from the hub's Services menu; with no cookie yet it is sent
through the hub's OAuth (``@authenticated`` → the hub's authorize URL → ``oauth_callback``), and
comes back with this service's cookie, which the JSON API then accepts as well (read-only methods;
unsafe ones need the hub's XSRF token, checked by :class:`HubOAuth`).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import tornado.web
from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated

from .auth import Denied, Identity
from .hubauth import identity_of

UI = Path(__file__).resolve().parent / "admin_ui"


class Page(HubOAuthenticated, tornado.web.RequestHandler):
    """A browser page: the hub's OAuth cookie identifies the user (``@authenticated`` sends them to log in)."""

    @staticmethod
    def identity(model: dict[str, Any]) -> Identity | None:
        """Our identity for the hub's user model; None when the user holds none of our scopes."""
        try:
            return identity_of(model, "hub-cookie")
        except Denied:
            return None


class HomePage(Page):
    """Who you are here, and where the API and your tasks are."""

    @tornado.web.authenticated
    def get(self) -> None:
        model: dict[str, Any] = self.current_user
        who = self.identity(model)
        name = html.escape(str(model.get("name", "")))
        role = "admin" if who and who.admin else ("user" if who else "no tacc scope")
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(
            "<!doctype html><html><head><meta charset='utf-8'><title>tacc_hub</title></head><body>"
            f"<h1>tacc_hub</h1><p id='who'>Signed in as <b>{name}</b> ({role}).</p>"
            "<ul><li><a href='api/tasks'>your tasks (JSON)</a></li><li><a href='api/cluster'>the cluster</a></li>"
            "<li><a href='api/quota'>your quota</a></li><li><a href='api/openapi.json'>the API</a></li>"
            + ("<li><a href='admin'>admin pages</a></li>" if who and who.admin else "") + "</ul>"
            "</body></html>")


class AdminPage(Page):
    """The admin pages (quotas, usage, queue, cluster): admins only, checked here and by every API they call."""

    def initialize(self, period: str = "month") -> None:
        self.period = period

    @tornado.web.authenticated
    def get(self) -> None:
        model: dict[str, Any] = self.current_user
        who = self.identity(model)
        if who is None or not who.admin:
            self.set_status(403)
            self.set_header("Content-Type", "text/html; charset=UTF-8")
            self.finish("<!doctype html><title>403 Forbidden</title><h1>403 Forbidden</h1>"
                        f"<p>The admin pages are for cluster admins; {html.escape(str(model.get('name')))} is not one."
                        "</p>")
            return
        self.render(str(UI / "admin.html"), xsrf=self.xsrf_token.decode(), user=who.user, period=self.period,
                    static=self.static_url_prefix(), hub_home=self.hub_auth.hub_prefix + "home")

    def static_url_prefix(self) -> str:
        return self.request.path.rsplit("/admin", 1)[0] + "/admin/static/"


def hub_routes(prefix: str, period: str = "month") -> list[Any]:
    return [(prefix + r"/?", HomePage), (prefix + r"/oauth_callback", HubOAuthCallbackHandler),
            (prefix + r"/admin/?", AdminPage, {"period": period}),
            (prefix + r"/admin/static/(admin\.(?:js|css))", tornado.web.StaticFileHandler, {"path": str(UI)})]
