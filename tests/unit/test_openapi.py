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


def test_quota_routes_are_documented_with_named_parameters_and_admin_errors():
    doc = build_openapi(ROUTES)
    one = doc["paths"]["/api/admin/quotas/{kind}/{name}"]
    assert set(one) == {"get", "put", "delete"}
    params = {p["name"]: p["schema"] for p in one["put"]["parameters"]}
    assert params == {"kind": {"type": "string", "enum": ["user", "group"]}, "name": {"type": "string"}}
    assert one["put"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/QuotaIn"}
    assert {"400", "403"} <= set(one["put"]["responses"])
    member = doc["paths"]["/api/admin/users/{user}/group"]
    assert set(member) == {"put", "delete"} and member["put"]["parameters"][0]["name"] == "user"
    assert doc["paths"]["/api/quota"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/MyQuotaOut"}
    for path in ("/api/admin/quotas", "/api/admin/groups"):
        assert "403" in doc["paths"][path]["get"]["responses"]
