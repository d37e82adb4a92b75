"""Specs: upload (JSON shape A or raw YAML shape B), versions, read, delete."""
from __future__ import annotations

import re

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from daemon.errors import Forbidden, InvalidRequest, NotFound, UnsupportedMediaType
from daemon.http import Routes, json_response, paginate, parse_body, read_bytes
from daemon.spec import SpecDocument, SpecValidationError, load_spec
from daemon.store import specs as spec_store

routes = Routes("specs")
YAML_TYPES = ("application/x-yaml", "text/yaml", "application/yaml", "text/x-yaml")
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class SpecUpload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    yaml: str = Field(min_length=1)


class SpecRecord(BaseModel):
    id: str
    name: str
    version: int
    latest_version: int
    yaml: str
    sha256: str
    created_at: str


class SpecVersion(BaseModel):
    version: int
    name: str
    sha256: str
    created_at: str


def validate_yaml(text: str, source: str) -> SpecDocument:
    try:
        return load_spec(text, source)
    except SpecValidationError as err:
        issues = err.details()["errors"]
        raise InvalidRequest(f"spec is invalid: {str(err).splitlines()[0]}" + (f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""), issues)


def check_id(spec_id: str) -> str:
    if ".." in spec_id or not SAFE_ID.match(spec_id):
        raise InvalidRequest(f"'{spec_id}' is not a valid spec id", [{"loc": "path.spec_id", "msg": "invalid id"}])
    return spec_id


async def owned_spec(request: web.Request, spec_id: str, version: int | None = None) -> dict:
    check_id(spec_id)
    record = await spec_store.get(request.app["store"], spec_id, version)
    if record is None:
        if version is not None and await spec_store.get(request.app["store"], spec_id):
            raise NotFound("spec", spec_id, f"spec '{spec_id}' has no version {version}")
        raise NotFound("spec", spec_id)
    if record["tenant_id"] != request["tenant_id"]:
        raise Forbidden(f"spec '{spec_id}' belongs to another tenant")
    return record


def _version_param(request: web.Request) -> int | None:
    raw = request.query.get("version")
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise InvalidRequest(f"query.version: expected a positive integer, got {raw!r}", [{"loc": "query.version", "msg": "expected a positive integer"}])
    return int(raw)


@routes.post(
    "/v1/specs",
    "Upload a spec (JSON {name, yaml} or a raw YAML body); an existing id gets a new version",
    body=SpecUpload,
    response=SpecRecord,
    status=201,
    content_types=("application/json", *YAML_TYPES),
)
async def upload_spec(request: web.Request) -> web.Response:
    if request.content_type in YAML_TYPES:
        raw = await read_bytes(request)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest("spec YAML must be UTF-8")
        name = request.query.get("name")
    elif request.content_type == "application/json":
        body = await parse_body(request, SpecUpload)
        text, name = body.yaml, body.name
    else:
        raise UnsupportedMediaType(
            f"expected application/json ({{name, yaml}}) or a YAML content type ({', '.join(YAML_TYPES[:2])}), got {request.content_type or 'none'}"
        )
    doc = validate_yaml(text, (name or "spec") + ".yaml" if not (name or "").endswith((".yaml", ".yml")) else name)
    existing = await spec_store.get(request.app["store"], doc.id)
    if existing is not None and existing["tenant_id"] != request["tenant_id"]:
        raise Forbidden(f"spec id '{doc.id}' belongs to another tenant")
    record, created = await spec_store.save_version(request.app["store"], request["tenant_id"], doc.id, name or doc.id, text)
    return json_response(SpecRecord(**record), status=201 if created else 200)


@routes.get("/v1/specs", "List specs (filter: name)", response=SpecRecord, paginated=True, query={"name": "exact spec name"})
async def list_specs(request: web.Request) -> web.Response:
    sql = (
        "SELECT s.seq, s.id, s.latest_version, s.created_at AS first_created_at, v.name, v.version, v.yaml, v.sha256, v.created_at"
        " FROM specs s JOIN spec_versions v ON v.spec_id = s.id AND v.version = s.latest_version WHERE s.tenant_id = ?"
    )
    params: list = [request["tenant_id"]]
    if request.query.get("name"):
        sql += " AND v.name = ?"
        params.append(request.query["name"])
    page = await paginate(request.app["store"], sql, params, request, lambda r: SpecRecord(**dict(r)))
    return json_response(page)


@routes.get("/v1/specs/{spec_id}", "Get a spec (latest, or ?version=N)", response=SpecRecord, query={"version": "spec version"})
async def get_spec(request: web.Request) -> web.Response:
    record = await owned_spec(request, request.match_info["spec_id"], _version_param(request))
    return json_response(SpecRecord(**record))


@routes.get("/v1/specs/{spec_id}/versions", "Every version of a spec, newest first", response=SpecVersion)
async def spec_versions(request: web.Request) -> web.Response:
    record = await owned_spec(request, request.match_info["spec_id"])
    items = await spec_store.versions(request.app["store"], record["id"])
    return json_response({"items": items, "next_cursor": None, "count": len(items)})


@routes.delete("/v1/specs/{spec_id}", "Delete a spec and all its versions")
async def delete_spec(request: web.Request) -> web.Response:
    record = await owned_spec(request, request.match_info["spec_id"])
    await spec_store.delete(request.app["store"], record["id"])
    return web.Response(status=204)
