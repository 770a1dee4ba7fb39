"""The OpenAPI document is generated from the routes and models, and is a valid OpenAPI 3.1 document."""

from __future__ import annotations

from openapi_spec_validator import validate

from tacc_hub.service.app import ROUTES
from tacc_hub.service.openapi import build_openapi


def test_openapi_document_is_valid_and_covers_every_route():
    doc = build_openapi(ROUTES)
    validate(doc)
    assert len(doc["paths"]) == len(ROUTES)
    submit = doc["paths"]["/api/tasks"]["post"]
    assert submit["requestBody"]["content"]["application/yaml"]["schema"] == {"$ref": "#/components/schemas/TaskSpec"}
    assert "422" in submit["responses"] and "201" in submit["responses"]
    assert "TaskSpec" in doc["components"]["schemas"] and "TaskOut" in doc["components"]["schemas"]
    assert doc["paths"]["/api/tasks/{id}"]["get"]["parameters"][0]["name"] == "id"
