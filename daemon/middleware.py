"""Middlewares run on every route, outermost first: request id + error body, auth, rate limit,
idempotency."""
from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid

from aiohttp import web

from daemon import auth
from daemon.errors import (
    ApiError,
    Conflict,
    Forbidden,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    Unauthorized,
)
from daemon.store import idempotency as idempotency_store
from daemon.util import sha256_hex
from daemon.appkeys import DEFAULT_TENANT_ID, IDEMPOTENCY_LOCKS, RATE_LIMITER, SETTINGS, STORE

log = logging.getLogger("svcd.http")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
PUBLIC_PATHS = {"/health", "/v1/health", "/v1/openapi.json"}
IDEMPOTENCY_TTL_S = 24 * 3600  # the default of Settings.idempotency_ttl_s (SERVICE_IDEMPOTENCY_TTL)


def error_response(err: ApiError, request_id: str) -> web.Response:
    headers = {"X-Request-ID": request_id, **err.headers}
    return web.json_response(err.body(request_id), status=err.status, headers=headers)


@web.middleware
async def request_id_and_errors(request: web.Request, handler):
    incoming = request.headers.get("X-Request-ID", "")
    request_id = incoming if REQUEST_ID.match(incoming) else "req_" + uuid.uuid4().hex[:16]
    request["request_id"] = request_id
    started = time.perf_counter()
    try:
        _check_path_params(request)
        response = await handler(request)
    except ApiError as err:
        response = error_response(err, request_id)
    except web.HTTPRequestEntityTooLarge:
        response = error_response(PayloadTooLarge(request.app[SETTINGS].max_body_bytes), request_id)
    except web.HTTPNotFound:
        response = error_response(NotFound("route", request.path, f"no route {request.method} {request.path}"), request_id)
    except web.HTTPMethodNotAllowed as exc:
        err = MethodNotAllowed(f"method {request.method} not allowed on {request.path}; allowed: {', '.join(sorted(exc.allowed_methods))}")
        err.headers = {"Allow": ",".join(sorted(exc.allowed_methods))}
        response = error_response(err, request_id)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        err = ApiError(exc.reason or "error")
        err.status, err.code = exc.status, exc.reason.lower().replace(" ", "_") if exc.reason else "error"
        response = error_response(err, request_id)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("unhandled error", extra={"request_id": request_id, "path": request.path})
        err = ApiError("internal error; the daemon log has the details under this request_id")
        response = error_response(err, request_id)
    if not response.prepared:
        response.headers["X-Request-ID"] = request_id
    log.info(
        "%s %s %s",
        request.method,
        request.path,
        response.status,
        extra={"request_id": request_id, "status": response.status, "ms": round((time.perf_counter() - started) * 1000, 2)},
    )
    return response


MAX_PATH_PARAM = 256
FREE_PATH_PARAMS = {"path"}  # workspace file paths: checked (and `..` refused) by daemon.sandbox.workspace.normalize


def _check_path_params(request: web.Request) -> None:
    """Ids and names in a URL are short, one segment, and printable: anything else is 400 before
    a handler sees it (`%2F..%2F`, `%00`, kilobytes of id)."""
    for name, value in request.match_info.items():
        if name in FREE_PATH_PARAMS:
            if "\x00" in value:
                raise InvalidRequest(f"path parameter '{name}' must not contain NUL bytes",
                                     [{"loc": f"path.{name}", "msg": "contains NUL"}])
            continue
        problem = None
        if len(value) > MAX_PATH_PARAM:
            problem = f"longer than {MAX_PATH_PARAM} characters"
        elif not value.isprintable():
            problem = "contains control characters or NUL bytes"
        elif "/" in value or "\\" in value:
            problem = "contains a path separator"
        elif value in (".", ".."):
            problem = "is a relative path segment"
        if problem:
            shown = value[:40].encode("unicode_escape", "backslashreplace").decode("ascii")
            raise InvalidRequest(f"path parameter '{name}' ({shown!r}) {problem}", [{"loc": f"path.{name}", "msg": problem}])


SANDBOX_SCOPED = re.compile(r"^/v1/sandboxes/(?P<id>[^/]+)(?P<rest>/.*)?$")


def via_sandbox_socket(request: web.Request) -> bool:
    transport = request.transport
    sockname = transport.get_extra_info("sockname") if transport is not None else None
    return isinstance(sockname, str) and sockname == str(request.app[SETTINGS].sandbox_socket_path)


@web.middleware
async def authenticate(request: web.Request, handler):
    if via_sandbox_socket(request):
        # Agents reach the daemon only through this socket: their sandbox token or nothing.
        token = auth.bearer_token(request.headers.get("Authorization", ""))
        principal = await auth.resolve_bearer(request.app[STORE], token) if token else None
        if principal is None or principal.kind != "sandbox":
            raise Unauthorized("the sandbox socket accepts only this sandbox's token (SERVICE_SANDBOX_TOKEN)")
        _check_sandbox_scope(request, principal)
        request["principal"] = principal
        request["tenant_id"] = principal.tenant_id
        return await handler(request)
    if request.path in PUBLIC_PATHS or getattr(handler, "public", False):
        return await handler(request)
    settings = request.app[SETTINGS]
    store = request.app[STORE]
    header = request.headers.get("Authorization", "")
    token = auth.bearer_token(header)
    principal = await auth.resolve_bearer(store, token) if token else None
    if principal is None:
        if settings.auth_disabled:
            principal = auth.Principal("anonymous", request.app[DEFAULT_TENANT_ID], is_admin=True)
        elif not header:
            raise Unauthorized("missing API key: send 'Authorization: Bearer svc_live_...'")
        else:
            raise Unauthorized("invalid or revoked API key")
    if principal.kind == "sandbox":
        _check_sandbox_scope(request, principal)
    request["principal"] = principal
    request["tenant_id"] = principal.tenant_id
    return await handler(request)


def _check_sandbox_scope(request: web.Request, principal: auth.Principal) -> None:
    """Sandbox tokens read only their own sandbox and post only to its trace endpoint."""
    match = SANDBOX_SCOPED.match(request.path)
    if not match or match.group("id") != principal.sandbox_id:
        raise Forbidden("a sandbox token may only read its own sandbox and post to its trace endpoint")
    if request.method in ("GET", "HEAD"):
        return
    if request.method == "POST" and match.group("rest") == "/trace":
        return
    raise Forbidden("a sandbox token may only read its own sandbox and post to its trace endpoint")


@web.middleware
async def rate_limit(request: web.Request, handler):
    """SERVICE_RATE_LIMIT per API key (or sandbox token) and, for keys, per tenant as well: minting
    more keys buys a tenant no more requests."""
    principal = request.get("principal")
    if principal is not None:
        buckets = request.app[RATE_LIMITER]
        wait = buckets.take("tenant:" + principal.tenant_id) if principal.kind != "sandbox" else 0
        if not wait:
            wait = buckets.take(principal.rate_key)
        if wait:
            raise RateLimited(wait)
    return await handler(request)


# Statuses an Idempotency-Key never stores: a conflict (409: a state the retry may find changed,
# e.g. a run still in progress or a key already used), a rate limit (429: retry later) and server
# errors (5xx): a retry of those runs the request again.
IDEMPOTENCY_NOT_STORED = {409, 429}


def _storable(status: int) -> bool:
    return status < 500 and status not in IDEMPOTENCY_NOT_STORED


@web.middleware
async def idempotency(request: web.Request, handler):
    """A POST with an `Idempotency-Key` runs once per (principal, key) for `SERVICE_IDEMPOTENCY_TTL`
    seconds (default 24 h): a retry with the same method, path and body gets the first answer again
    (same status and body, header `Idempotent-Replayed: true`), a different request 409 `conflict`.

    Stored: every 2xx, 3xx and 4xx answer, error answers included (a 400 or 404 replays the same
    400 or 404, with the first request's body and request_id). Not stored, so a retry runs again:
    409, 429 and 5xx. Expired entries are never replayed (and are purged hourly). A 2xx of a
    `secret_once` route keeps only the marker {resource, id}: its replay is 409 `secret_shown_once`.

    The principal is the API key (or the sandbox token) that sent the request (Principal.scope): two
    keys of a tenant, or a tenant's key and its agent's sandbox token, never see each other's records.
    """
    key = request.headers.get("Idempotency-Key")
    if request.method != "POST" or not key or "principal" not in request:
        return await handler(request)
    if len(key) > 255 or not IDEMPOTENCY_KEY.match(key):
        raise InvalidRequest("Idempotency-Key must be 1 to 255 printable ASCII characters",
                             [{"loc": "header.Idempotency-Key", "msg": "1 to 255 printable ASCII characters"}])
    store = request.app[STORE]
    tenant_id = request["tenant_id"]
    scope = request["principal"].scope
    ttl_s = request.app[SETTINGS].idempotency_ttl_s
    body_hash = sha256_hex(request.method + " " + request.path_qs + "\n" + (await request.read()).decode("utf-8", "replace"))
    locks: dict = request.app[IDEMPOTENCY_LOCKS]
    lock = locks.setdefault((tenant_id, scope, key), asyncio.Lock())
    try:
        async with lock:
            row = await idempotency_store.find(store, tenant_id, scope, key, time.time() - ttl_s)
            if row is not None:
                if row["body_sha256"] != body_hash:
                    raise Conflict(
                        f"Idempotency-Key '{key}' was already used with a different request ({row['method']} {row['path']})",
                        state="used",
                    )
                if row["content_type"] == SECRET_MARKER_TYPE:
                    raise _secret_shown_once(key, row["body"])
                return web.Response(
                    status=row["status"],
                    body=row["body"],
                    content_type=row["content_type"].split(";")[0],
                    headers={"Idempotent-Replayed": "true"},
                )
            try:
                response = await handler(request)
            except ApiError as err:
                if not _storable(err.status):
                    raise
                # the error answer is stored and replayed like any other (same body, same request_id)
                response = error_response(err, request["request_id"])
            if isinstance(response, web.Response) and _storable(response.status) and response.body is not None:
                content_type, body = response.content_type or "application/json", bytes(response.body)
                info = getattr(request.match_info.route.handler, "route_info", None)
                if info is not None and info.secret_once and 200 <= response.status < 300:
                    # The answer holds a one-time secret: keep only which resource it created.
                    content_type, body = SECRET_MARKER_TYPE, _secret_marker(info.secret_once, body)
                await idempotency_store.save(store, tenant_id=tenant_id, principal=scope, key=key, method=request.method,
                                             path=request.path, body_sha256=body_hash, status=response.status,
                                             content_type=content_type, body=body, created_at=time.time())
            return response
    finally:
        locks.pop((tenant_id, scope, key), None)


SECRET_MARKER_TYPE = "application/vnd.svc.secret-shown-once+json"


def _secret_marker(resource: str, body: bytes) -> bytes:
    try:
        resource_id = json.loads(body).get("id")
    except (ValueError, AttributeError):
        resource_id = None
    return json.dumps({"resource": resource, "id": resource_id if isinstance(resource_id, str) else None}).encode()


def _secret_shown_once(key: str, marker: bytes) -> Conflict:
    try:
        data = json.loads(marker)
    except ValueError:
        data = {}
    resource, resource_id = data.get("resource") or "resource", data.get("id")
    return Conflict(
        f"Idempotency-Key '{key}' was already used: that request created {resource} '{resource_id}', whose secret was shown "
        "once, in the original answer, and is not kept; it cannot be shown again (rotate or create a new one for a new secret)",
        state="secret_shown_once", resource=resource, id=resource_id,
    )


async def purge_expired_idempotency(store, ttl_s: float = IDEMPOTENCY_TTL_S) -> int:
    """Delete entries older than `ttl_s` (Settings.idempotency_ttl_s); lookups ignore them anyway."""
    return await idempotency_store.purge_older_than(store, time.time() - ttl_s)
