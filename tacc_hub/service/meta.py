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
