"""The OpenAPI document, generated from the route table (daemon/contract/routes.py, as bound to its
handlers) and exactly the contract models the route wrapper validates requests and answers with
(daemon/contract)."""
from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from daemon import __version__
from daemon.config import Settings
from daemon.contract.common import (CURSOR_PATTERN, DEFAULT_LIMIT, ID_PATTERN, JSON_VALUE_MARK, MAX_LIMIT, ErrorBody,
                                    json_value_components)
from daemon.http import RouteInfo

API_VERSION = "1.0.0"
ERROR_CODES = {
    400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict",
    413: "payload_too_large", 415: "unsupported_media_type", 429: "rate_limited", 500: "internal_error",
    503: "at_capacity",
}
# Path parameters that are not plain ids.
PATH_PARAMS: dict[str, dict[str, Any]] = {
    "version": {"type": "string", "pattern": r"^[1-9][0-9]{0,17}$"},
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "pattern": r"^[ -~]+$"},
}

# Path parameters named alike on different routes, by route prefix.
PATH_PARAMS_BY_PREFIX: dict[tuple[str, str], dict[str, Any]] = {
    ("/v1/secrets/", "name"): {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"},
}


def _path_param(info: RouteInfo, name: str) -> dict[str, Any]:
    if name in info.path_params:
        return info.path_params[name]
    for (prefix, param), schema in PATH_PARAMS_BY_PREFIX.items():
        if param == name and info.path.startswith(prefix):
            return schema
    return PATH_PARAMS.get(name) or {"type": "string", "pattern": ID_PATTERN}


def _schema_ref(model: type[BaseModel], components: dict[str, Any], mode: str = "validation") -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode=mode)  # type: ignore[arg-type]
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = definition
    name = schema.get("title") or model.__name__
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    components[name] = schema
    return {"$ref": f"#/components/schemas/{name}"}


JSON_VALUE_REF = {"$ref": "#/components/schemas/JsonValue"}


def _json_values(node: Any) -> Any:
    """Every JsonValue marker (daemon.contract.common.JsonValue) made a reference to the component."""
    if isinstance(node, list):
        return [_json_values(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _json_values(value) for key, value in node.items()}
    mark = out.pop(JSON_VALUE_MARK, None)
    if mark == "any":
        out.update(JSON_VALUE_REF)
    elif mark == "not-null":
        out.update({"allOf": [JSON_VALUE_REF], "not": {"type": "null"}})
    return out


def _query_params(model: type[BaseModel], components: dict[str, Any]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = definition
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        description = prop.pop("description", None)
        prop.pop("title", None)
        # an optional parameter is simply left out: its `null` alternative is not sendable in a query
        if "anyOf" in prop:
            options = [o for o in prop["anyOf"] if o.get("type") != "null"]
            if len(options) == 1:
                rest = {k: v for k, v in prop.items() if k != "anyOf"}
                prop = {**options[0], **rest}
        if prop.get("default") is None:
            prop.pop("default", None)
        param: dict[str, Any] = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if description:
            param["description"] = description
        params.append(param)
    return params


def _error(status: int, description: str | None = None) -> dict[str, Any]:
    return {"description": description or ERROR_CODES[status],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


REFUSES = "x-refuses-valid"  # why a schema-valid request may still be refused with 400
# What the server checks beyond a JSON Schema, by route name: a request that matches the schema may
# still be refused with 400 for these reasons (on top of an integer beyond 64 bits anywhere in a
# JSON body, which the JsonValue components and info.description say for every operation).
REFUSALS: dict[str, str] = {
    "upload_spec": ("`yaml` is not a valid spec document (the errors name its lines), a file of `files` is not base64 or "
                    "not named by a fixture path of the spec, or a score rule or alert the spec declares is invalid"),
    "upload_agent": ("`bundle` is not a .tar.gz archive with safe relative paths, or a string `entrypoint` does not split "
                     "as a shell command (an unclosed quote)"),
    "create_score_rule": "`pattern` does not compile (within 2 s), or `judge_id` names none of the tenant's judges",
    "ingest_traces": ("an event names an experiment that does not exist (`events.N.experiment_id`); an event of the "
                      "wrong shape is not a 400: it is reported in `errors` by index and the others are kept"),
    "ingest_otlp": "the body is empty or not an OTLP ExportTraceServiceRequest (protobuf, or OTLP/JSON)",
    "create_experiment": ("replicas x matrix entries is more than 10000 runs, `dataset_version` is given for a spec "
                          "without parallelism.dataset or is past its dataset's latest version, or `filter_failing_from` "
                          "names an experiment of another spec"),
    "import_experiment": "`experiment` is not a whole exported RunResults (every key of one is checked)",
    "import_trajectory": ("the document breaks a rule of the ATIF RFC a JSON Schema does not carry: step ids are not 1, 2, "
                          "3, ... in order, a field only agent steps have is on another step, an observation answers no "
                          "tool call of its step, a timestamp is not ISO 8601, a whole-valued float stands for an integer, a "
                          "subagent trajectory is not a valid one or they nest more than 3 deep, or the document makes "
                          "more than 10000 trace events"),
    "list_dataset_records": "`version` is past the dataset's latest version",
    "diff_dataset_versions": "`from` or `to` is past the dataset's latest version",
    "add_dataset_records": "a record is larger than 64 KiB as compact JSON",
    "eval_judge": "`input`, `output` or `expected` is longer than 100000 characters as JSON",
    "calibrate_judge": "an example's `input`, `output` or `expected` is longer than 100000 characters as JSON",
    "post_verdicts": "a verdict's `label` is not one of the behavior's labels",
    "create_webhook": ("the URL's host is not a valid IP address or name, or leads to an address the daemon never "
                       "calls (see the description)"),
}
# Request bodies of routes that take no JSON model (the route table declares their media types).
REQUEST_BODIES: dict[str, dict[str, Any]] = {
    "ingest_otlp": {"required": True, "content": {
        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
        "application/json": {"schema": {"type": "object", "description": "OTLP/JSON ExportTraceServiceRequest"}}}},
}


# Resources a client creates, reads and deletes: (create method, create path, item path, where the new
# resource's id is in the create answer). The document links each create to what reads or deletes
# the new resource (the item and every GET under it that takes no other parameter), a read to the
# delete, and the delete to those reads again, so a stateful client (schemathesis) can walk a
# resource's whole life and see that a deleted one, and everything under it, is gone.
RESOURCE_LINKS: tuple[tuple[str, str, str, str], ...] = (
    ("post", "/v1/specs", "/v1/specs/{spec_id}", "$response.body#/id"),
    ("put", "/v1/secrets/{name}", "/v1/secrets/{name}", "$request.path.name"),
    ("post", "/v1/agents", "/v1/snapshots/{snapshot_id}", "$response.body#/id"),
    ("post", "/v1/webhooks", "/v1/webhooks/{webhook_id}", "$response.body#/id"),
    ("post", "/v1/datasets", "/v1/datasets/{dataset_id}", "$response.body#/id"),
    ("post", "/v1/judges", "/v1/judges/{judge_id}", "$response.body#/id"),
    ("post", "/v1/score-rules", "/v1/score-rules/{rule_id}", "$response.body#/id"),
    ("post", "/v1/alerts", "/v1/alerts/{alert_id}", "$response.body#/id"),
    ("post", "/v1/behaviors", "/v1/behaviors/{behavior_id}", "$response.body#/id"),
    ("post", "/v1/conversations", "/v1/conversations/{conversation_id}", "$response.body#/id"),
)


def _success(operation: dict[str, Any]) -> dict[str, Any]:
    return next(response for status, response in operation["responses"].items() if status.startswith("2"))


def _link(operation: dict[str, Any], name: str, target: str, param: str, value: str) -> None:
    _success(operation).setdefault("links", {})[name] = {"operationId": target, "parameters": {param: value}}


def _add_links(paths: dict[str, Any]) -> None:
    for method, create_path, item_path, id_from in RESOURCE_LINKS:
        create = paths.get(create_path, {}).get(method)
        item = paths.get(item_path, {})
        if create is None or not item:
            continue
        param = re.findall(r"\{(\w+)\}", item_path)[-1]
        here = f"$request.path.{param}"
        reads = {path: ops["get"]["operationId"] for path, ops in paths.items()
                 if "get" in ops and (path == item_path or path.startswith(item_path + "/")) and path.count("{") == item_path.count("{")
                 and "text/event-stream" not in _success(ops["get"]).get("content", {})}
        delete = item.get("delete")
        for path, target in reads.items():
            name = "read_" + re.sub(r"[^A-Za-z0-9]+", "_", path[len(item_path):]).strip("_") if path != item_path else "read"
            _link(create, name.rstrip("_"), target, param, id_from)
            if delete is not None:
                _link(delete, name.rstrip("_") + "_after_delete", target, param, here)
        if delete is not None:
            _link(create, "delete", delete["operationId"], param, id_from)
            if "get" in item:
                _link(item["get"], "delete", delete["operationId"], param, here)


API_NOTE = ("The svc daemon's HTTP API. Every JSON body goes through one decoder: an integer written without a fraction "
            "or exponent is 64-bit (from -2^63 to 2^63-1) and arrays and objects nest at most 128 levels, anywhere in the "
            "body; beyond that the body is refused with 400 naming the number or the depth. An operation's `x-refuses-valid` "
            "says what else a request that matches its schema may be refused for.")
STREAM_ITEM = "x-item-schema"  # the schema of each item of a stream (SSE or NDJSON)


def servers(settings: Settings | None) -> list[dict[str, str]]:
    """Where this daemon answers HTTP: 127.0.0.1 on its SERVICE_PORT; over its unix socket only when
    the port is 0 (a client then connects through SERVICE_SOCKET)."""
    if settings is None or not settings.port:
        where = settings.socket_path if settings is not None else "SERVICE_SOCKET"
        return [{"url": "http://localhost", "description": f"over the unix socket {where} (SERVICE_PORT is 0: no TCP)"}]
    return [{"url": f"http://127.0.0.1:{settings.port}"}]


def build_openapi(routes: list[RouteInfo], settings: Settings | None = None) -> dict[str, Any]:
    components: dict[str, Any] = dict(json_value_components())
    _schema_ref(ErrorBody, components)
    components["Error"] = components.pop("ErrorBody")
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
            {"name": name, "in": "path", "required": True,
             "schema": _path_param(info, name)}
            for name in re.findall(r"\{(\w+)", info.path)
        ]
        if info.query_model is not None:
            params += _query_params(info.query_model, components)
        else:
            params += [
                {"name": name, "in": "query", "required": False, "schema": {"type": "string"}, "description": desc}
                for name, desc in info.query.items()  # type: ignore[union-attr]
            ]
            if info.paginated:
                params += [
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "default": DEFAULT_LIMIT, "minimum": 1, "maximum": MAX_LIMIT}},
                    {"name": "cursor", "in": "query", "schema": {"type": "string", "pattern": CURSOR_PATTERN}},
                ]
        if params:
            operation["parameters"] = params
        name = info.route.name if info.route is not None else ""
        if name in REQUEST_BODIES:
            operation["requestBody"] = REQUEST_BODIES[name]
        elif info.body is not None:
            operation["requestBody"] = {
                "required": not (info.route is not None and info.route.body_optional),
                "content": {ct: {"schema": _schema_ref(info.body, components)} for ct in info.content_types},
            }
        success: dict[str, Any] = {"description": "success"}
        if info.stream:
            # The body as a whole is text: one item per SSE `data:` line or NDJSON line. OpenAPI 3.1
            # has no keyword for a stream's items (3.2's itemSchema), so the extension names it.
            item = _schema_ref(info.events, components, "serialization") if info.events else {}
            what = "one JSON item per `data:` line" if info.stream == "text/event-stream" else "one JSON item per line"
            success["content"] = {info.stream: {"schema": {"type": "string", "description": what},
                                                **({STREAM_ITEM: item} if item else {})}}
            if info.response is not None:
                success["content"]["application/json"] = {"schema": _schema_ref(info.answer_model, components, "serialization")}  # type: ignore[arg-type]
        elif info.response is not None:
            ref = _schema_ref(info.answer_model, components, "serialization")  # type: ignore[arg-type]
            success["content"] = {"application/json": {"schema": ref}}
        if info.description:
            operation["description"] = info.description
        operation["responses"][str(info.status)] = success
        operation["responses"].update(info.responses)
        statuses: set[int] = set(info.errors)
        if info.auth:
            statuses |= {401, 403, 429}
        if "requestBody" in operation:
            statuses |= {400, 413, 415}
        if params or info.body is not None or info.path.startswith("/v1/"):
            statuses.add(400)  # hostile path params and headers, bad query values
        if "{" in info.path:
            statuses.add(404)
        if info.secret_once:
            statuses.add(409)
        refuses = REFUSALS.get(name)
        if refuses:
            operation[REFUSES] = refuses
        for status in sorted(statuses):
            note = f"invalid_request: the request does not match the schema, or {refuses}" if status == 400 and refuses else None
            operation["responses"][str(status)] = _error(status, note)
        if info.auth:
            operation["security"] = [{"bearer": []}]
        paths.setdefault(path, {})[info.method.lower()] = operation
    _add_links(paths)
    components = _json_values(components)
    return {
        "openapi": "3.1.0",
        "info": {"title": "svc", "version": API_VERSION, "x-daemon-version": __version__, "description": API_NOTE},
        "servers": servers(settings),
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
