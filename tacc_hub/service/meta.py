"""Unauthenticated endpoints: health, version, the OpenAPI document."""

from __future__ import annotations

from typing import Any, ClassVar

import tacc_hub

from .base import ApiHandler


class HealthHandler(ApiHandler):
    public = True
    openapi = {"get": {"summary": "Liveness and version."}}

    def get(self) -> None:
        self.write_json({"status": "ok", "version": tacc_hub.__version__})


class OpenAPIHandler(ApiHandler):
    public = True
    document: ClassVar[dict[str, Any]] = {}
    openapi = {"get": {"summary": "This API's OpenAPI 3.1 document."}}

    def get(self) -> None:
        self.write_json(self.document)


class WhoAmIHandler(ApiHandler):
    openapi = {"get": {"summary": "The caller as the service sees them: user, admin, and how they were identified "
                                  "(token: this service's; hub-token or hub-cookie: through JupyterHub)."}}

    def get(self) -> None:
        self.write_json({"user": self.user, "admin": self.admin, "via": self.identity.via})
