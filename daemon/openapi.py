"""The OpenAPI document, built from the route registry and its pydantic models."""
from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from daemon import __version__
from daemon.http import RouteInfo

API_VERSION = "1.0.0"
ERROR_CODES = {
    400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict",
    413: "payload_too_large", 415: "unsupported_media_type", 429: "rate_limited", 500: "internal_error",
    503: "at_capacity",
}


def _schema_ref(model: type[BaseModel], components: dict[str, Any]) -> dict[str, str]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = definition
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def build_openapi(routes: list[RouteInfo]) -> dict[str, Any]:
    components: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error", "message"],
            "properties": {
                "error": {"type": "string", "enum": sorted(set(ERROR_CODES.values()))},
                "message": {"type": "string"},
                "request_id": {"type": "string"},
                "details": {"type": "object"},
            },
        }
    }
    paths: dict[str, Any] = {}
    for info in routes:
        path = re.sub(r"\{(\w+)(:[^}]*)?\}", r"{\1}", info.path)
        operation: dict[str, Any] = {
            "summary": info.summary,
            "tags": [info.tag],
            "operationId": f"{info.method.lower()}_{info.handler.__name__}",
            "responses": {},
        }
        params = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in re.findall(r"\{(\w+)", info.path)
        ]
        params += [
            {"name": name, "in": "query", "required": False, "schema": {"type": "string"}, "description": desc}
            for name, desc in info.query.items()
        ]
        if info.paginated:
            params += [
                {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 100, "minimum": 1}},
                {"name": "cursor", "in": "query", "schema": {"type": "string"}},
            ]
        if params:
            operation["parameters"] = params
        if info.body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {ct: {"schema": _schema_ref(info.body, components)} for ct in info.content_types},
            }
        success: dict[str, Any] = {"description": "success"}
        if info.stream:
            success["content"] = {info.stream: {"schema": {"type": "string"}}}
        elif info.response is not None:
            ref = _schema_ref(info.response, components)
            if info.paginated:
                ref = {
                    "type": "object",
                    "properties": {"items": {"type": "array", "items": ref}, "next_cursor": {"type": ["string", "null"]}, "count": {"type": "integer"}},
                }
            success["content"] = {"application/json": {"schema": ref}}
        if info.description:
            operation["description"] = info.description
        operation["responses"][str(info.status)] = success
        for status in (([401, 403, 429] if info.auth else []) + ([400, 413, 415] if info.body else [])
                       + ([400] if params and not info.body else [])  # hostile path params, bad query values
                       + ([404] if "{" in info.path else []) + ([409] if info.secret_once else [])):
            operation["responses"][str(status)] = {
                "description": ERROR_CODES[status],
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            }
        if info.auth:
            operation["security"] = [{"bearer": []}]
        paths.setdefault(path, {})[info.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "svc", "version": API_VERSION, "x-daemon-version": __version__},
        "servers": [{"url": "http://127.0.0.1:7878"}],
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
