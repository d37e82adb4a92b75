"""Sandboxes: create (shape A `image` / shape B `spec_id`), list, get, delete; commands, files,
state, diff, timeout and the lifecycle stream. Handlers are thin: the work is in
`daemon.sandbox.manager.SandboxManager` (`app[SANDBOXES]`)."""
from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import mimetypes
import os
from typing import Any, AsyncIterator

from aiohttp import web

from daemon.app import owned
from daemon.contract.common import Page
from daemon.contract.sandboxes import (
    MAX_DURATION_S,
    CommandRequest,
    Duration,
    FileWrite,
    Node,
    NodeList,
    Sandbox,
    SandboxCreate,
    TimeoutRequest,
)
from daemon.errors import InvalidRequest
from daemon.appkeys import SANDBOXES
from daemon.contract import routes as R
from daemon.http import EVENTS, SETTINGS, STORE, Routes, page_of, page_params, parse_body
from daemon.sandbox.engine.select import make_driver
from daemon.store import keys as key_store
from daemon.sandbox.manager import SandboxManager, topic
from daemon.contract.sandboxes import LIVE_STATES, STATE_TO_STATUS, STATUS_TO_STATE
from daemon.sse import sse_response
from daemon.store import sandboxes as sandbox_store
from daemon.store.db import loads

log = logging.getLogger("svcd.sandbox")
routes = Routes("sandboxes")


def manager(request: web.Request) -> SandboxManager:
    return request.app[SANDBOXES]


def _duration(value: Duration | None, loc: str) -> float | None:
    if value is None:
        return None
    from daemon.spec import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise InvalidRequest(f"{loc}: {exc}", [{"loc": loc, "msg": str(exc)}])
    if seconds <= 0:
        raise InvalidRequest(f"{loc}: must be more than zero", [{"loc": loc, "msg": "must be more than zero"}])
    if seconds > MAX_DURATION_S:
        raise InvalidRequest(f"{loc}: at most 366d", [{"loc": loc, "msg": "at most 366d"}])
    return seconds


async def owned_sandbox(request: web.Request) -> Any:
    sandbox_id = request.match_info["sandbox_id"]
    row = await sandbox_store.get(request.app[STORE], sandbox_id)
    return owned(row, request, "sandbox", sandbox_id)


@routes.post(R.CREATE_SANDBOX, "Create a sandbox: shape A (image; 201 at once, provisioning) or shape B (spec_id; 201 once ready or failed)", typed=True, errors=(503,))
async def create_sandbox(request: web.Request) -> Any:
    body = await parse_body(request, SandboxCreate)
    if body.spec_id and body.image:
        raise InvalidRequest("give either image (shape A) or spec_id (shape B), not both",
                             [{"loc": "image", "msg": "not allowed together with spec_id"}])
    timeout_s = _duration(body.timeout, "timeout")
    common = dict(seed=body.seed, timeout_s=timeout_s, metadata=body.metadata, secrets=body.secrets, extra_env=body.env)
    if body.spec_id:
        from daemon.api.specs import owned_spec, validate_yaml

        if body.services:
            raise InvalidRequest("services come from the spec in shape B; leave services out",
                                 [{"loc": "services", "msg": "not allowed together with spec_id"}])
        record = await owned_spec(request, body.spec_id, body.spec_version)
        doc = validate_yaml(record["yaml"], f"{record['id']}.yaml")
        from daemon.caps import check_caps

        check_caps(doc, request.app[SETTINGS], record["yaml"])
        booting = await manager(request).boot(request["tenant_id"], spec=doc, spec_id=record["id"],
                                              spec_version=record["version"], shape="B", **common)
        await booting.result()
    else:
        if body.spec_version is not None:
            raise InvalidRequest("spec_version needs spec_id", [{"loc": "spec_version", "msg": "needs spec_id"}])
        if not body.image:
            raise InvalidRequest("image is required (shape A), or give spec_id (shape B)",
                                 [{"loc": "image", "msg": "field required"}])
        booting = await manager(request).boot(request["tenant_id"], image=body.image, services=body.services, shape="A",
                                              **common)
    row = await sandbox_store.get(request.app[STORE], booting.id)
    return sandbox_body(row)


def sandbox_body(row: Any) -> dict[str, Any]:
    """The public sandbox body (DECISIONS "Sandboxes": both vocabularies) from a sandboxes row."""
    error = None
    if row["error_step"] or row["error_message"]:
        error = {"step": row["error_step"], "message": row["error_message"]}
    return {
        "id": row["id"],
        "status": STATE_TO_STATUS.get(row["state"], row["state"]),
        "state": row["state"],
        "image": row["image"],
        "services": loads(row["services"], []),
        "seed": row["seed"],
        "spec_id": row["spec_id"],
        "spec_version": row["spec_version"],
        "metadata": loads(row["metadata"], {}),
        "resources": loads(row["resources"], {}),
        "secrets": loads(row["secret_names"], []),
        "limits_exceeded": loads(row["limits_exceeded"], []),
        "created_at": row["created_at"],
        "ready_at": row["ready_at"],
        "expires_at": row["expires_at"],
        "stopped_at": row["stopped_at"],
        "stop_reason": row["stop_reason"],
        "error": error,
        "boot": {"pooled": bool(row["boot_pooled"]), "ms": float(row["boot_ms"])} if row["boot_ms"] is not None else None,
        "node": row["node"],
    }


@routes.get(R.LIST_SANDBOXES, "List sandboxes, newest first (filters: status in either vocabulary, 'active' (default) or 'all'; spec_id)")
async def list_sandboxes(request: web.Request) -> Page[Sandbox]:
    status = request["query"].status or "active"
    states: list[str] | None = None
    if status == "active":
        states = list(LIVE_STATES)
    elif status != "all":
        states = []
        for part in status.split(","):
            part = part.strip()
            state = STATUS_TO_STATE.get(part, part)
            if state not in STATE_TO_STATUS:
                raise InvalidRequest(f"query.status: unknown status '{part}'", [{"loc": "query.status", "msg": "unknown status"}])
            states.append(state)
    rows = await sandbox_store.page(request.app[STORE], request["tenant_id"], *page_params(request), states=states,
                                    spec_id=request["query"].spec_id or None)
    return page_of(rows, sandbox_body)


@routes.get(R.LIST_NODES, "The nodes sandboxes run on (the local engine, or each swarm node) with what the live "
                          "sandboxes reserve there and which of the caller's run where", typed=True)
async def list_nodes(request: web.Request) -> NodeList:
    sandboxes = manager(request)
    nodes = await sandboxes.driver.nodes()
    tenant = request["tenant_id"]
    every_tenant = request["principal"].is_admin  # another tenant's activity is not a tenant's to see
    placed: dict[str, list[Any]] = {}
    for sb in list(sandboxes.live):
        if sb.node is not None and (every_tenant or sb.tenant_id == tenant):
            placed.setdefault(sb.node, []).append(sb)

    def answer(node: dict[str, Any]) -> Node:
        here = placed.get(node["name"], [])
        return Node(name=node["name"], role=node["role"], state=node["state"], availability=node["availability"],
                    message=node["message"], reachable=node["reachable"], cpus=node["nano_cpus"] / 1e9,
                    memory_bytes=node["memory_bytes"], reserved_cpus=round(sum(sb.limits.cpus for sb in here), 3),
                    reserved_memory_bytes=sum(sb.limits.memory for sb in here), live_sandboxes=len(here),
                    sandboxes=sorted(sb.id for sb in here if sb.tenant_id == tenant))

    return NodeList(runtime=sandboxes.driver.runtime, nodes=[answer(node) for node in nodes])


@routes.get(R.GET_SANDBOX, "Get a sandbox (stopped ones stay readable)", typed=True)
async def get_sandbox(request: web.Request) -> Any:
    row = await owned_sandbox(request)
    return sandbox_body(row)


@routes.delete(R.DELETE_SANDBOX, "Stop a sandbox and release everything (any state; cancels a boot in progress)")
async def delete_sandbox(request: web.Request) -> web.Response:
    row = await owned_sandbox(request)
    await asyncio.shield(manager(request).destroy(row["id"], reason="deleted"))
    return web.Response(status=204)


@routes.post(R.RUN_SANDBOX_COMMAND, "Run a command in the sandbox (waits for a boot in progress)", typed=True, errors=(409,))
async def run_command(request: web.Request) -> Any:
    row = await owned_sandbox(request)
    body = await parse_body(request, CommandRequest)
    if isinstance(body.command, list) and (not body.command or not all(body.command)):
        raise InvalidRequest("command: an argument list must not be empty", [{"loc": "command", "msg": "empty"}])
    if isinstance(body.command, str) and not body.command.strip():
        raise InvalidRequest("command must not be empty", [{"loc": "command", "msg": "empty"}])
    result = await manager(request).exec(row["id"], body.command, timeout_s=_duration(body.timeout, "timeout"), env=body.env,
                                         workdir=body.workdir, background=body.background, user=body.user)
    return result.as_dict()


@routes.post(R.WRITE_SANDBOX_FILE, "Write a file in the workspace ('/workspace/a.txt' and 'a.txt' are the same)", typed=True, errors=(409, 413))
async def write_file(request: web.Request) -> Any:
    row = await owned_sandbox(request)
    body = await parse_body(request, FileWrite)
    if body.encoding == "base64":
        try:
            data = base64.b64decode(body.content, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRequest("content is not valid base64", [{"loc": "content", "msg": "invalid base64"}])
    else:
        data = body.content.encode("utf-8")
    info = await manager(request).write_file(row["id"], body.path, data)
    return info


@routes.get(R.READ_SANDBOX_FILE, "Read a workspace file (raw bytes)", errors=(409,),
            responses={"200": {"description": "the file's bytes", "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}}})
async def read_file(request: web.Request) -> web.StreamResponse:
    row = await owned_sandbox(request)
    opened = await manager(request).open_file(row["id"], request.match_info["path"])
    content_type = mimetypes.guess_type(request.match_info["path"])[0] or "application/octet-stream"
    if isinstance(opened, bytes):
        return web.Response(body=opened, content_type=content_type)
    fd, size = opened
    try:
        return await _stream_fd(request, fd, size, content_type)
    finally:
        os.close(fd)


FILE_CHUNK = 1024 * 1024


async def _stream_fd(request: web.Request, fd: int, size: int, content_type: str) -> web.StreamResponse:
    """The file's first `size` bytes (its size when opened), read a chunk at a time in a worker
    thread: the daemon's memory does not grow with the file."""
    response = web.StreamResponse(status=200, headers={"Content-Type": content_type, "X-Request-ID": request["request_id"]})
    response.content_length = size
    await response.prepare(request)
    sent = 0
    try:
        while sent < size:
            chunk = await asyncio.to_thread(os.pread, fd, min(FILE_CHUNK, size - sent), sent)
            if not chunk:
                break  # the file shrank meanwhile: the client sees a short body
            await response.write(chunk)
            sent += len(chunk)
        if sent == size:
            await response.write_eof()
        elif request.transport is not None:
            request.transport.close()  # cannot keep the promised Content-Length: end the connection
    except (ConnectionResetError, ConnectionError):
        pass
    except OSError:
        log.exception("reading a workspace file failed mid-stream")
        if request.transport is not None:
            request.transport.close()
    return response


@routes.delete(R.DELETE_SANDBOX_FILE, "Delete a workspace file", errors=(409,))
async def delete_file(request: web.Request) -> web.Response:
    row = await owned_sandbox(request)
    await manager(request).delete_file(row["id"], request.match_info["path"])
    return web.Response(status=204)


@routes.get(R.SANDBOX_STATE, "Every workspace file with size, sha256 and mode (.svc/ left out)", typed=True, errors=(409,))
async def workspace_state(request: web.Request) -> Any:
    row = await owned_sandbox(request)
    return await manager(request).state(row["id"])


@routes.get(R.SANDBOX_DIFF, "Workspace changes since the manifest taken when boot finished", typed=True, errors=(409,))
async def workspace_diff(request: web.Request) -> Any:
    row = await owned_sandbox(request)
    return await manager(request).diff(row["id"])


@routes.post(R.SET_SANDBOX_TIMEOUT, "Set the sandbox's remaining life from now ({timeout: '10m'}); 409 when stopped", typed=True, errors=(409,))
async def set_timeout(request: web.Request) -> Any:
    row = await owned_sandbox(request)
    body = await parse_body(request, TimeoutRequest)
    seconds = _duration(body.timeout, "timeout")
    await manager(request).set_timeout(row["id"], seconds)
    return sandbox_body(await sandbox_store.get(request.app[STORE], row["id"]))


@routes.get(R.SANDBOX_EVENTS, "Lifecycle stream (SSE): status steps, commands, audit events; closes after destroyed")
async def sandbox_events(request: web.Request) -> web.StreamResponse:
    row = await owned_sandbox(request)
    bus = request.app[EVENTS]
    name = topic(row["id"])
    if row["state"] in LIVE_STATES or bus.history.get(name) or name in bus.closed:
        events: AsyncIterator[Any] = bus.subscribe(name)
    else:
        events = _past_events(row)
    return await sse_response(request, events)


async def _past_events(row: Any) -> AsyncIterator[Any]:
    """What a sandbox that ended before this daemon (re)started, or long ago, can still tell."""
    if row["state"] == "error":
        yield {"event_type": "status", "data": {"state": "error", "step": row["error_step"], "message": row["error_message"]}}
    yield {"event_type": "status", "data": {"state": "destroyed"}}


# --- wiring ----------------------------------------------------------------------------------------


def setup(app: web.Application) -> None:
    app.cleanup_ctx.append(_sandboxes_ctx)


async def _sandboxes_ctx(app: web.Application):
    settings = app[SETTINGS]
    store = app[STORE]
    if not settings.daemon_id:
        settings.daemon_id = await sandbox_store.daemon_id(store)
    settings.workspaces_dir.mkdir(parents=True, exist_ok=True)
    sandboxes = SandboxManager(settings, store, app[EVENTS], make_driver(settings))
    from daemon.sandbox.network import SandboxPolicyExtension

    sandboxes.extensions.append(SandboxPolicyExtension(settings))  # egress/db proxies, audit, determinism
    app[SANDBOXES] = sandboxes
    from daemon.runner.engine import engine_of
    from daemon.sandbox.prewarm import queue_hook

    engine_of(app).queue_hooks.append(queue_hook(app, sandboxes))  # the warm pool fills for queued runs
    engine_of(app).scheduler.several_tenants = await key_store.count_tenants(store) > 1
    try:
        await asyncio.wait_for(sandboxes.start(), 60)
    except Exception:
        log.exception("reaping orphaned sandboxes failed")
    yield
    await sandboxes.shutdown()
