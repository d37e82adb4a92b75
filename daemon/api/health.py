from __future__ import annotations

from aiohttp import web

from daemon import __version__
from daemon.appkeys import SANDBOXES
from daemon.contract.common import Health, SandboxPoolStats
from daemon.http import ROUTE_INFOS, Routes, json_response
from daemon.openapi import build_openapi

routes = Routes("health")


@routes.get("/health", "Liveness probe (no auth)", response=Health, auth=False, typed=True)
async def health(request: web.Request) -> Health:
    return _health(request)


@routes.get("/v1/health", "Liveness probe (no auth)", response=Health, auth=False, typed=True)
async def health_v1(request: web.Request) -> Health:
    return _health(request)


def _health(request: web.Request) -> Health:
    sandboxes = request.app.get(SANDBOXES)
    pool = SandboxPoolStats(**sandboxes.pool.stats()) if sandboxes is not None else None
    return Health(status="ok", version=__version__, sandbox_pool=pool)


@routes.get("/v1/openapi.json", "This API's OpenAPI 3.1 document", auth=False)
async def openapi(request: web.Request) -> web.Response:
    return json_response(build_openapi(request.app[ROUTE_INFOS]))
