"""Browser pages of the service in hub mode: the OAuth callback and the landing page.

A browser reaches ``/services/tacc/`` from the hub's Services menu; with no cookie yet it is sent
through the hub's OAuth (``@authenticated`` → the hub's authorize URL → ``oauth_callback``), and
comes back with this service's cookie, which the JSON API then accepts as well (read-only methods;
unsafe ones need the hub's XSRF token, checked by :class:`HubOAuth`).
"""

from __future__ import annotations

import html
from typing import Any

import tornado.web
from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated

from .auth import Denied, Identity
from .hubauth import identity_of


class HomePage(HubOAuthenticated, tornado.web.RequestHandler):
    """Who you are here, and where the API and your tasks are."""

    @tornado.web.authenticated
    def get(self) -> None:
        model: dict[str, Any] = self.current_user
        try:
            who: Identity | None = identity_of(model, "hub-cookie")
        except Denied:
            who = None
        name = html.escape(str(model.get("name", "")))
        role = "admin" if who and who.admin else ("user" if who else "no tacc scope")
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.finish(
            "<!doctype html><html><head><meta charset='utf-8'><title>tacc_hub</title></head><body>"
            f"<h1>tacc_hub</h1><p id='who'>Signed in as <b>{name}</b> ({role}).</p>"
            "<ul><li><a href='api/tasks'>your tasks (JSON)</a></li><li><a href='api/cluster'>the cluster</a></li>"
            "<li><a href='api/quota'>your quota</a></li><li><a href='api/openapi.json'>the API</a></li></ul>"
            "</body></html>")


def hub_routes(prefix: str) -> list[tuple[str, Any]]:
    return [(prefix + r"/?", HomePage), (prefix + r"/oauth_callback", HubOAuthCallbackHandler)]
