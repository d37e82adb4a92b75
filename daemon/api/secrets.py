"""The daemon's own secret store (the `dashboard` secret source). Values are never returned."""
from __future__ import annotations

import re

from aiohttp import web
from daemon.contract.secrets import SecretInfo, SecretPut
from daemon.errors import InvalidRequest, NotFound
from daemon.contract import routes as R
from daemon.http import Routes, json_response
from daemon.store import secrets as secret_store
from daemon.appkeys import STORE

routes = Routes("secrets")
SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _name(request: web.Request) -> str:
    name = request.match_info["name"]
    if not SECRET_NAME.fullmatch(name):
        raise InvalidRequest(f"secret name '{name}' is not a valid environment variable name", [{"loc": "path.name", "msg": "invalid name"}])
    return name


@routes.put(R.PUT_SECRET, "Store a secret value (write-only)")
async def put_secret(request: web.Request) -> web.Response:
    name = _name(request)
    body: SecretPut = request["body"]
    row = await secret_store.put(request.app[STORE], request["tenant_id"], name, body.value)
    return json_response(SecretInfo(**row))


@routes.get(R.GET_SECRET, "Secret metadata (the value is never returned)")
async def get_secret(request: web.Request) -> web.Response:
    name = _name(request)
    row = await secret_store.get(request.app[STORE], request["tenant_id"], name)
    if row is None:
        raise NotFound("secret", name)
    return json_response(SecretInfo(**row))


@routes.get(R.LIST_SECRETS, "List secret names")
async def list_secrets(request: web.Request) -> web.Response:
    rows = await secret_store.list_names(request.app[STORE], request["tenant_id"])
    items = [SecretInfo(**r).model_dump() for r in rows]
    return json_response({"items": items, "next_cursor": None, "count": len(items)})


@routes.delete(R.DELETE_SECRET, "Delete a secret")
async def delete_secret(request: web.Request) -> web.Response:
    name = _name(request)
    if not await secret_store.delete(request.app[STORE], request["tenant_id"], name):
        raise NotFound("secret", name)
    return web.Response(status=204)

