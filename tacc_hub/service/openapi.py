"""The OpenAPI document, generated from the routes and the pydantic models they declare.

Nothing here is written by hand per endpoint: each handler's ``openapi``
attribute (next to its code) and the response models are the single source.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

import tacc_hub
from tacc_hub.schema import TaskSpec

from .base import ApiHandler
from .models import ErrorOut


def _schema_ref(model: type[BaseModel], comps: dict[str, Any]) -> dict[str, str]:
    schema = model.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
    for name, sub in schema.pop("$defs", {}).items():
        comps[name] = sub
    comps[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def build_openapi(routes: list[tuple[str, type[ApiHandler]]]) -> dict[str, Any]:
    comps: dict[str, Any] = {}
    spec_ref = _schema_ref(TaskSpec, comps)
    err_ref = _schema_ref(ErrorOut, comps)
    paths: dict[str, Any] = {}
    for pattern, handler in routes:
        path = pattern.rstrip("$")
        name = "digest" if "/code/" in path else "id"
        # A named group (?P<kind>...) names its parameter; an unnamed one is the id (or digest).
        # A group that is a list of words (user|group) becomes an enum.
        enums: dict[str, list[str]] = {}

        def _param(m: re.Match[str], default: str = name, enums: dict[str, list[str]] = enums) -> str:
            pname = m.group(1) or default
            if re.fullmatch(r"\w+(\|\w+)+", m.group(2)):
                enums[pname] = m.group(2).split("|")
            return "{" + pname + "}"

        path = re.sub(r"\((?:\?P<(\w+)>)?([^)]*)\)", _param, path)
        ops: dict[str, Any] = {}
        for method, doc in handler.openapi.items():
            op: dict[str, Any] = {"summary": doc.get("summary", ""), "responses": {}}
            params = [{"name": p, "in": "path", "required": True,
                       "schema": {"type": "string", **({"enum": enums[p]} if p in enums else {})}}
                      for p in re.findall(r"{(\w+)}", path)]
            params += [{"name": k, "in": "query", "required": False, "description": v, "schema": {"type": "string"}}
                       for k, v in doc.get("params", {}).items()]
            if params:
                op["parameters"] = params
            req = doc.get("request")
            if req == "TaskSpec":
                op["requestBody"] = {"required": True, "content": {
                    "application/json": {"schema": spec_ref}, "application/yaml": {"schema": spec_ref}}}
            elif isinstance(req, type) and issubclass(req, BaseModel):
                op["requestBody"] = {"required": True, "content": {
                    "application/json": {"schema": _schema_ref(req, comps)}}}
            elif isinstance(req, str):
                op["requestBody"] = {"required": True, "content": {req: {}}}
            resp = doc.get("response")
            status = str(doc.get("status", 200))
            if isinstance(resp, type) and issubclass(resp, BaseModel):
                op["responses"][status] = {"description": "OK", "content": {
                    "application/json": {"schema": _schema_ref(resp, comps)}}}
            elif isinstance(resp, str):
                op["responses"][status] = {"description": "OK", "content": {resp: {}}}
            else:
                op["responses"][status] = {"description": "OK"}
            if not handler.public:
                op["security"] = [{"token": []}]
                for code, what in (("401", "no valid token"), ("404", "no such task (or not yours)"),
                                   ("422", "invalid input; `errors` names each field"),
                                   *doc.get("errors", {}).items()):
                    op["responses"][code] = {"description": what,
                                             "content": {"application/json": {"schema": err_ref}}}
            ops[method] = op
        if ops:
            paths[path] = ops
    return {
        "openapi": "3.1.0",
        "info": {"title": "tacc_hub API", "version": tacc_hub.__version__},
        "paths": paths,
        "components": {"schemas": comps, "securitySchemes": {
            "token": {"type": "apiKey", "in": "header", "name": "Authorization",
                      "description": "`token <TOKEN>` or `Bearer <TOKEN>`"}}},
    }
