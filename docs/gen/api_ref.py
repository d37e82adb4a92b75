"""The HTTP API reference (docs/reference/api.md and docs/reference/openapi.json), from the OpenAPI
document the daemon serves at GET /v1/openapi.json (daemon.openapi.build_openapi over the routes an
app built by daemon.app.create_app mounts): every operation with its parameters, body and answers,
and every schema they name."""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import refcommon as common
from spec_ref import type_of

SCRIPT = "api_ref.py"
METHODS = ("get", "post", "put", "patch", "delete")


def document() -> dict[str, Any]:
    from daemon.app import create_app
    from daemon.http import ROUTE_INFOS
    from daemon.config import Settings
    from daemon.openapi import build_openapi

    with tempfile.TemporaryDirectory() as home:  # the app is built, never started: nothing is written there
        app = create_app(Settings(home=Path(home)))
        return build_openapi(app[ROUTE_INFOS])


def operation_anchor(method: str, path: str) -> str:
    return (method + "-" + re.sub(r"[^a-z0-9]+", "-", path.lower())).strip("-")


def schema_anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _type(schema: dict[str, Any]) -> str:
    return type_of(schema, schema_anchor)


def _text(value: Any) -> str:
    return " ".join(str(value or "").split())


def _operation(method: str, path: str, op: dict[str, Any]) -> str:
    out = [f"### {method.upper()} {path} {{#{operation_anchor(method, path)}}}\n", _text(op.get("summary")) + "\n"]
    if op.get("description"):
        out.append(_text(op["description"]) + "\n")
    if "security" not in op:
        out.append("No API key needed.\n")
    params = op.get("parameters", [])
    if params:
        rows = [[f"`{p['name']}`", p["in"], "yes" if p.get("required") else "no", _type(p.get("schema", {})),
                 _text(p.get("description") or p.get("schema", {}).get("description"))] for p in params]
        out.append(common.table(["Parameter", "In", "Required", "Type", "Description"], rows))
    body = op.get("requestBody")
    if body:
        kinds = ", ".join(f"`{ct}`: {_type(c.get('schema', {}))}" for ct, c in body["content"].items())
        out.append(f"Body: {kinds}\n")
    rows = []
    for status, answer in op["responses"].items():
        content = answer.get("content", {})
        shapes = []
        for ct, c in content.items():
            shape = _type(c["schema"]) if c.get("schema") else ""
            if c.get("itemSchema"):
                shape = f"stream of {_type(c['itemSchema'])}"
            shapes.append(f"`{ct}` {shape}".strip())
        rows.append([f"`{status}`", _text(answer.get("description")), "; ".join(shapes)])
    out.append(common.table(["Status", "Meaning", "Body"], rows))
    return "\n".join(out)


def _schema(name: str, schema: dict[str, Any]) -> str:
    out = [f"### {name} {{#{schema_anchor(name)}}}\n"]
    if schema.get("description"):
        out.append(_text(schema["description"]) + "\n")
    props = schema.get("properties", {})
    if props:
        required = set(schema.get("required", []))
        rows = [[f"`{key}`", _type(prop), "yes" if key in required else "no",
                 f"`{json.dumps(prop['default'])}`" if "default" in prop else "–",
                 _text(prop.get("description"))] for key, prop in props.items()]
        out.append(common.table(["Field", "Type", "Required", "Default", "Description"], rows))
    elif not schema.get("description"):
        out.append(f"{_type(schema)}\n")
    return "\n".join(out)


def render(doc: dict[str, Any] | None = None) -> str:
    doc = doc or document()
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, ops in doc["paths"].items():
        for method in METHODS:
            if method in ops:
                by_tag.setdefault(ops[method]["tags"][0], []).append((method, path, ops[method]))
    out = [common.header(SCRIPT), "# HTTP API reference\n",
           f"The `/v1` API of `svcd` (API version {doc['info']['version']}), from the OpenAPI document the daemon "
           "generates from its route table and contract models (`daemon/contract/`) and serves at "
           "`GET /v1/openapi.json` ([a copy](openapi.json)). The daemon listens on a Unix socket "
           "(`$SERVICE_HOME/svcd.sock`, mode 0600) and on `http://127.0.0.1:7878`; send the API key as "
           "`Authorization: Bearer KEY`. Every error answer is `{error, message, request_id, details?}` with one "
           "of the [error codes](errors.md). Lists are paginated with `limit` and `cursor`.\n",
           "## Operations\n"]
    for tag in sorted(by_tag):
        out.append(f"- **{tag}**: " + ", ".join(f"[`{m.upper()} {p}`](#{operation_anchor(m, p)})" for m, p, _ in by_tag[tag]))
    out.append("")
    for tag in sorted(by_tag):
        out.append(f"## {tag} {{#tag-{re.sub(r'[^a-z0-9]+', '-', tag.lower()).strip('-')}}}\n")
        for method, path, op in by_tag[tag]:
            out.append(_operation(method, path, op))
    out.append("## Schemas\n")
    for name in sorted(doc["components"]["schemas"]):
        out.append(_schema(name, doc["components"]["schemas"][name]))
    return "\n".join(out)


def openapi_json(doc: dict[str, Any] | None = None) -> str:
    return json.dumps(doc or document(), indent=1, sort_keys=True) + "\n"
