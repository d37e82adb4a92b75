"""The daemon's own secret store (the `dashboard` secret source). Values are never returned."""
from __future__ import annotations

import re

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from daemon.errors import InvalidRequest, NotFound
from daemon.http import Routes, json_response, parse_body
from daemon.store import secrets as secret_store
from daemon.appkeys import STORE

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
    row = await secret_store.put(request.app[STORE], request["tenant_id"], name, body.value)
    return json_response(SecretInfo(**row))


@routes.get("/v1/secrets/{name}", "Secret metadata (the value is never returned)", response=SecretInfo)
async def get_secret(request: web.Request) -> web.Response:
    name = _name(request)
    row = await secret_store.get(request.app[STORE], request["tenant_id"], name)
    if row is None:
        raise NotFound("secret", name)
    return json_response(SecretInfo(**row))


@routes.get("/v1/secrets", "List secret names")
async def list_secrets(request: web.Request) -> web.Response:
    rows = await secret_store.list_names(request.app[STORE], request["tenant_id"])
    items = [SecretInfo(**r).model_dump() for r in rows]
    return json_response({"items": items, "next_cursor": None, "count": len(items)})


@routes.delete("/v1/secrets/{name}", "Delete a secret")
async def delete_secret(request: web.Request) -> web.Response:
    name = _name(request)
    if not await secret_store.delete(request.app[STORE], request["tenant_id"], name):
        raise NotFound("secret", name)
    return web.Response(status=204)

