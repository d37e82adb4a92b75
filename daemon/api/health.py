from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel

from daemon import __version__
from daemon.http import Routes, json_response
from daemon.openapi import build_openapi

routes = Routes("health")


class Health(BaseModel):
    status: str
    version: str


@routes.get("/health", "Liveness probe (no auth)", response=Health, auth=False)
async def health(request: web.Request) -> web.Response:
    return json_response(Health(status="ok", version=__version__))


@routes.get("/v1/health", "Liveness probe (no auth)", response=Health, auth=False)
async def health_v1(request: web.Request) -> web.Response:
    return json_response(Health(status="ok", version=__version__))


@routes.get("/v1/openapi.json", "This API's OpenAPI 3.1 document", auth=False)
async def openapi(request: web.Request) -> web.Response:
    return json_response(build_openapi(request.app["route_infos"]))
