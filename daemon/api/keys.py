"""API keys and tenants. Secrets are shown once, at creation or rotation."""
from __future__ import annotations

from aiohttp import web

from daemon import auth
from daemon.runner.engine import engine_of
from daemon.app import owned
from daemon.contract.common import Page
from daemon.contract.keys import Key, KeyCreate, KeyWithSecret, TenantCreate, TenantCreated
from daemon.errors import Conflict, Forbidden
from daemon.contract import routes as R
from daemon.http import SETTINGS, STORE, Routes, page_of, page_params
from daemon.store import keys as key_store

routes = Routes("keys")
SECRET_ONCE_NOTE = (
    "The answer carries a secret that is shown once and never stored in clear. With an `Idempotency-Key`, the daemon "
    "keeps only which resource the request created, not the answer: a replay of the same request answers 409 "
    "`conflict` with `details: {state: \"secret_shown_once\", resource, id}` naming that resource, and the secret "
    "cannot be shown again (rotate the key, or create a new one)."
)


def _key(row) -> Key:
    return Key(id=row["id"], name=row["name"], prefix=row["prefix"], created_at=row["created_at"], rotated_at=dict(row).get("rotated_at"))


@routes.post(R.CREATE_KEY, "Create an API key (its secret is returned once)",
             secret_once="key", description=SECRET_ONCE_NOTE + " 409 `limit_reached` when the tenant already has "
             "SERVICE_MAX_KEYS_PER_TENANT keys (default 20): revoke one first.", typed=True, errors=(409,))
async def create_key(request: web.Request) -> KeyWithSecret:
    body: KeyCreate = request["body"]
    store = request.app[STORE]
    limit = request.app[SETTINGS].max_keys_per_tenant
    if await key_store.count_keys(store, request["tenant_id"]) >= limit:
        raise Conflict(f"a tenant has at most {limit} API keys (SERVICE_MAX_KEYS_PER_TENANT); revoke one before creating "
                       "another (or rotate one)", "limit_reached", limit=limit, resource="keys")
    key, secret = await auth.create_key(store, request["tenant_id"], body.name)
    return KeyWithSecret(**_key(key).model_dump(), secret=secret)


@routes.get(R.LIST_KEYS, "List API keys (never their secrets)")
async def list_keys(request: web.Request) -> Page[Key]:
    return page_of(await key_store.key_page(request.app[STORE], request["tenant_id"], *page_params(request)), _key)


async def _own_key(request: web.Request) -> dict:
    key_id = request.match_info["key_id"]
    row = await key_store.get_key(request.app[STORE], key_id)
    return owned(row, request, "key", key_id)


@routes.post(R.ROTATE_KEY, "Rotate a key: the old secret stops working at once",
             secret_once="key", description=SECRET_ONCE_NOTE, typed=True)
async def rotate_key(request: web.Request) -> KeyWithSecret:
    row = await _own_key(request)
    secret = await auth.rotate_key(request.app[STORE], row["id"])
    fresh = await key_store.get_key(request.app[STORE], row["id"])
    return KeyWithSecret(**_key(fresh).model_dump(), secret=secret)


@routes.delete(R.DELETE_KEY, "Revoke a key")
async def delete_key(request: web.Request) -> web.Response:
    row = await _own_key(request)
    await key_store.delete_key(request.app[STORE], row["id"])
    return web.Response(status=204)


@routes.post(R.CREATE_TENANT, "Create a tenant and its first key (admin key only)",
             secret_once="tenant", description=SECRET_ONCE_NOTE, typed=True, errors=(409,))
async def create_tenant(request: web.Request) -> TenantCreated:
    if not request["principal"].is_admin:
        raise Forbidden("only an admin key may create tenants")
    body: TenantCreate = request["body"]
    store = request.app[STORE]
    if await key_store.tenant_exists(store, body.name):
        raise Conflict(f"tenant '{body.name}' already exists", state="exists")
    tenant = await auth.create_tenant(store, body.name)
    engine_of(request.app).scheduler.several_tenants = True  # the per-tenant cap applies from now on
    key, secret = await auth.create_key(store, tenant["id"], "default")
    return TenantCreated(id=tenant["id"], name=tenant["name"], created_at=tenant["created_at"], key=KeyWithSecret(**_key(key).model_dump(), secret=secret))
