from __future__ import annotations

from aiohttp import web

from daemon import __version__
from daemon.appkeys import SANDBOXES
from daemon.contract.common import Health, SandboxPoolStats
from daemon.contract import routes as R
from daemon.http import ROUTE_INFOS, SETTINGS, Routes, json_response
from daemon.openapi import build_openapi

routes = Routes("health")


HEALTH_NOTE = ("No key needed. The warm pool's per-shape maps (`pooled`, `booting`, `retry_in_s`, keyed by a "
               "shape hash that tells which specs run here) are answered only with a valid API key; without one they are empty.")


@routes.get(R.HEALTH, "Liveness probe (no auth)", auth=False, typed=True, description=HEALTH_NOTE)
async def health(request: web.Request) -> Health:
    return await _health(request)


@routes.get(R.HEALTH_V1, "Liveness probe (no auth)", auth=False, typed=True, description=HEALTH_NOTE)
async def health_v1(request: web.Request) -> Health:
    return await _health(request)


async def _authenticated(request: web.Request) -> bool:
    """Whether the request carries a valid API key (the route itself is public)."""
    from daemon import auth
    from daemon.appkeys import STORE

    token = auth.bearer_token(request.headers.get("Authorization", ""))
    if token is None:
        return False
    principal = await auth.resolve_bearer(request.app[STORE], token)
    return principal is not None and principal.kind == "key"


async def _health(request: web.Request) -> Health:
    sandboxes = request.app.get(SANDBOXES)
    pool = None
    if sandboxes is not None:
        stats = sandboxes.pool.stats()
        if not await _authenticated(request):  # shape hashes name what runs here: not for anyone who asks
            stats.update(pooled={}, booting={}, retry_in_s={})
        pool = SandboxPoolStats(**stats)
    return Health(status="ok", version=__version__, sandbox_pool=pool)


@routes.get(R.GET_OPENAPI, "This API's OpenAPI 3.1 document", auth=False)
async def openapi(request: web.Request) -> web.Response:
    return json_response(build_openapi(request.app[ROUTE_INFOS], request.app[SETTINGS]))
