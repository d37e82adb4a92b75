"""The aiohttp application factory: settings, store, middlewares and every API module."""
from __future__ import annotations

import asyncio
import importlib
import logging
import os
import re
from pathlib import Path
from typing import Any, Awaitable, Callable

from aiohttp import web
from aiohttp.web_urldispatcher import ResourceRoute, UrlMappingMatchInfo

from daemon import auth, netguard
from daemon.config import Settings
from daemon.events import EventBus
from daemon.http import EVENTS, ROUTE_INFOS, SETTINGS, SPEC_CHECK_HOOKS, SPEC_SAVED_HOOKS, STORE, RouteInfo, check_bindings
from daemon.middleware import authenticate, idempotency, purge_expired_idempotency, rate_limit, request_id_and_errors
from daemon.ratelimit import TokenBuckets
from daemon.store.db import Store
from daemon.appkeys import DEFAULT_TENANT_ID, IDEMPOTENCY_LOCKS, RATE_LIMITER

log = logging.getLogger("svcd")

# Each module has `routes: Routes` (its handlers, bound to entries of daemon/contract/routes.py) and
# may have `setup(app)` to add cleanup contexts.
API_MODULES = (
    "daemon.api.traces",
    "daemon.api.atif",
    "daemon.api.health",
    "daemon.api.keys",
    "daemon.api.specs",
    "daemon.api.secrets",
    "daemon.api.sandboxes",
    "daemon.api.agents",
    "daemon.api.webhooks",
    "daemon.api.runs",
    "daemon.api.effects",
    "daemon.api.experiments",
    "daemon.api.baselines",
    "daemon.api.replicas",
    "daemon.api.judges",
    "daemon.api.scores",
    "daemon.api.alerts",
    "daemon.api.behaviors",
    "daemon.api.datasets",
    "daemon.api.conversations",
    "daemon.api.chat",
)


def create_app(settings: Settings | None = None) -> web.Application:
    settings = settings or Settings.from_env()
    netguard.configure(settings.outbound_allow_private)  # process-wide: what tenant URLs may reach
    app = web.Application(
        middlewares=[request_id_and_errors, authenticate, rate_limit, idempotency],
        client_max_size=settings.max_body_bytes,
    )
    # Typed keys (daemon.http) for the API modules; the string keys stay for the runner, sandbox
    # and middleware modules that still read them.
    app[SETTINGS] = settings
    from daemon.logs import throttle_accept_errors

    throttle_accept_errors()  # a flood of connections must not fill the log with accept() failures
    app[EVENTS] = EventBus()
    app[RATE_LIMITER] = TokenBuckets(settings.rate_limit_per_s, settings.rate_limit_burst)
    app[IDEMPOTENCY_LOCKS] = {}
    app[ROUTE_INFOS] = []
    app[SPEC_CHECK_HOOKS] = []
    app[SPEC_SAVED_HOOKS] = []
    app.cleanup_ctx.append(_store_ctx)
    infos: list[RouteInfo] = []
    for name in API_MODULES:
        module = importlib.import_module(name)
        infos += module.routes.items
        if hasattr(module, "setup"):
            module.setup(app)
    check_bindings(infos)  # one handler per table route, each `async def name(request)`, or no app
    mount(app, infos)
    app.cleanup_ctx.append(_housekeeping_ctx)
    return app


def _template(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{\w+(?::[^}]*)?\\\}", "[^/]+", re.escape(path)) + "$")


def mount(app: web.Application, infos: list[RouteInfo]) -> None:
    """Every route, a literal path (`/v1/experiments/compare`) before any templated one it would
    also match (`/v1/experiments/{experiment_id}`): the literal path answers its own methods and
    405 with its own `Allow` for any other, as the document says, instead of falling through."""
    templated = [_template(i.path) for i in infos if "{" in i.path]
    shadowed = {i.path for i in infos if "{" not in i.path and any(t.match(i.path) for t in templated)}
    order = [i for i in infos if i.path in shadowed] + [i for i in infos if i.path not in shadowed]
    literal: dict[str, web.AbstractResource] = {}
    for info in order:
        handler = info.handler
        if not info.auth:
            handler.public = True  # type: ignore[attr-defined]
        handler.route_info = info  # type: ignore[attr-defined]  # read back by middlewares via match_info.route
        if info.path in shadowed:
            if info.path not in literal:
                allowed = sorted({i.method for i in infos if i.path == info.path})
                literal[info.path] = _LiteralResource(info.path, _method_not_allowed(info.path, allowed, info))
                app.router.register_resource(literal[info.path])
            literal[info.path].add_route(info.method, handler)
        else:
            app.router.add_route(info.method, info.path, handler)
        app[ROUTE_INFOS].append(info)


class _LiteralResource(web.PlainResource):
    """A literal path whose other methods answer 405 with its own Allow (they would otherwise fall
    through to a templated resource). The 405 route is not one of the resource's routes: it is
    not a served operation, only the answer for the methods the path does not have."""

    def __init__(self, path: str, fallback: Any):
        super().__init__(path)
        self._fallback = ResourceRoute("*", fallback, self)

    async def resolve(self, request: web.Request) -> Any:
        match, allowed = await super().resolve(request)
        if match is None and allowed:
            return UrlMappingMatchInfo({}, self._fallback), allowed
        return match, allowed


def _method_not_allowed(path: str, allowed: list[str], info: RouteInfo):
    async def method_not_allowed(request: web.Request) -> web.Response:
        from daemon.errors import MethodNotAllowed

        err = MethodNotAllowed(f"method {request.method} not allowed on {path}; allowed: {', '.join(allowed)}")
        err.headers = {"Allow": ",".join(allowed)}
        raise err

    method_not_allowed.route_info = info  # type: ignore[attr-defined]  # authenticated like the route itself
    return method_not_allowed


# $SERVICE_HOME's own directories, made (the first four) and kept 0700 at start. Sandboxes still
# work: Docker bind-mounts a workspace by its own path, so container users never walk the parents.
PRIVATE_DIRS = ("blobs", "logs", "workspaces", "sandbox-runtime", "sandbox-evidence", "sandbox-disks", "artifacts")
PRIVATE_FILES = ("svc.db", "svc.db-wal", "svc.db-shm", "credentials", "svcd.pid", "url-signing.key")


def secure_home(settings: Settings) -> None:
    """$SERVICE_HOME and its directories 0700; the database (with its -wal/-shm), the credentials
    file, the pidfile, the signing key and the logs 0600. Only the daemon's own names are touched
    (sockets keep their modes), and a shared sticky directory such as /tmp is never narrowed."""
    home = settings.home
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not home.stat().st_mode & 0o1000 and home.resolve() != Path("/"):
        _chmod(home, 0o700)
    for name in PRIVATE_DIRS:
        path = home / name
        if name in PRIVATE_DIRS[:4]:
            path.mkdir(exist_ok=True, mode=0o700)
        if path.is_dir() and not path.is_symlink():
            _chmod(path, 0o700)
    for name in PRIVATE_FILES:
        path = home / name
        if path.is_file() and not path.is_symlink():
            _chmod(path, 0o600)
    for entry in os.scandir(settings.logs_dir):
        if entry.is_file(follow_symlinks=False):
            _chmod(Path(entry.path), 0o600)


def _chmod(path: Path, mode: int) -> None:
    try:
        if (path.stat().st_mode & 0o7777) != mode:
            os.chmod(path, mode)
    except OSError as exc:
        log.warning("cannot set mode %o on %s: %s", mode, path, exc)


async def _store_ctx(app: web.Application):
    settings: Settings = app[SETTINGS]
    secure_home(settings)
    store = await Store.open(settings.db_path)
    app[STORE] = store
    app[DEFAULT_TENANT_ID] = await auth.bootstrap(store, settings.credentials_path)
    if settings.auth_disabled:
        log.warning("authentication is DISABLED (SERVICE_AUTH_DISABLED=1): every local caller acts as the default tenant")
    yield
    await store.close()


async def _housekeeping_ctx(app: web.Application):
    async def loop() -> None:
        while True:
            try:
                await purge_expired_idempotency(app[STORE], app[SETTINGS].idempotency_ttl_s)
            except Exception:
                log.exception("idempotency purge failed")
            await asyncio.sleep(3600)

    task = asyncio.create_task(loop())
    yield
    task.cancel()


def owned(row: Any, request: web.Request, resource: str, id: str) -> Any:
    """404 when the row is missing, 403 when it belongs to another tenant."""
    from daemon.errors import Forbidden, NotFound

    if row is None:
        raise NotFound(resource, id)
    if row["tenant_id"] != request["tenant_id"]:
        raise Forbidden(f"{resource} '{id}' belongs to another tenant")
    return row


async def owned_by_path(request: web.Request, param: str, get: Callable[[Store, str], Awaitable[Any]], resource: str) -> Any:
    """The row named by the path parameter `param`, loaded with `get(store, id)`; 404/403 as owned()."""
    row_id = request.match_info[param]
    return owned(await get(request.app[STORE], row_id), request, resource, row_id)
