"""The daemon's own secret store (the `dashboard` secret source). Values are never returned."""
from __future__ import annotations

import re

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from daemon.errors import InvalidRequest, NotFound
from daemon.http import Routes, json_response, parse_body
from daemon.util import now_iso

routes = Routes("secrets")
SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class SecretPut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: str = Field(min_length=1, max_length=65536)


class SecretInfo(BaseModel):
    name: str
    created_at: str
    updated_at: str


def _name(request: web.Request) -> str:
    name = request.match_info["name"]
    if not SECRET_NAME.match(name):
        raise InvalidRequest(f"secret name '{name}' is not a valid environment variable name", [{"loc": "path.name", "msg": "invalid name"}])
    return name


@routes.put("/v1/secrets/{name}", "Store a secret value (write-only)", body=SecretPut, response=SecretInfo)
async def put_secret(request: web.Request) -> web.Response:
    name = _name(request)
    body = await parse_body(request, SecretPut)
    now = now_iso()
    await request.app["store"].execute(
        "INSERT INTO secrets (tenant_id, name, value, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (request["tenant_id"], name, body.value, now, now),
    )
    row = await request.app["store"].fetchone(
        "SELECT name, created_at, updated_at FROM secrets WHERE tenant_id = ? AND name = ?", (request["tenant_id"], name)
    )
    return json_response(SecretInfo(**dict(row)))


@routes.get("/v1/secrets/{name}", "Secret metadata (the value is never returned)", response=SecretInfo)
async def get_secret(request: web.Request) -> web.Response:
    name = _name(request)
    row = await request.app["store"].fetchone(
        "SELECT name, created_at, updated_at FROM secrets WHERE tenant_id = ? AND name = ?", (request["tenant_id"], name)
    )
    if row is None:
        raise NotFound("secret", name)
    return json_response(SecretInfo(**dict(row)))


@routes.get("/v1/secrets", "List secret names")
async def list_secrets(request: web.Request) -> web.Response:
    rows = await request.app["store"].fetchall(
        "SELECT name, created_at, updated_at FROM secrets WHERE tenant_id = ? ORDER BY name", (request["tenant_id"],)
    )
    items = [SecretInfo(**dict(r)).model_dump() for r in rows]
    return json_response({"items": items, "next_cursor": None, "count": len(items)})


@routes.delete("/v1/secrets/{name}", "Delete a secret")
async def delete_secret(request: web.Request) -> web.Response:
    name = _name(request)
    count = await request.app["store"].execute("DELETE FROM secrets WHERE tenant_id = ? AND name = ?", (request["tenant_id"], name))
    if not count:
        raise NotFound("secret", name)
    return web.Response(status=204)


async def dashboard_secrets(store, tenant_id: str) -> dict[str, str]:
    rows = await store.fetchall("SELECT name, value FROM secrets WHERE tenant_id = ?", (tenant_id,))
    return {r["name"]: r["value"] for r in rows}
