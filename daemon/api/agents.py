"""Agent snapshots: multipart upload, resolve by latest / tag / version / id, lists, delete."""
from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from pydantic import ValidationError

from daemon.agents.store import BundleError, get_store, inspect_bundle
from daemon.contract.agents import NAME_RE, NAME_SCHEMA, Snapshot, SnapshotMetadata
from daemon.contract.common import ID_PATTERN, Page
from daemon.errors import ApiError, Conflict, Forbidden, InvalidRequest, NotFound, PayloadTooLarge, UnsupportedMediaType
from daemon.contract import routes as R
from daemon.http import SETTINGS, STORE, Routes, decode_json, page_of, page_params, pydantic_errors
from daemon.store import agents as agent_rows

routes = Routes("agents")
UNPACK_FACTOR = 20  # a bundle may unpack to at most 20x the upload limit
NAME_PARAM = {"name": NAME_SCHEMA}
TAG_PARAM = {"name": NAME_SCHEMA, "tag": {"type": "string", "pattern": ID_PATTERN}}


class _BytesStream:
    """Enough of aiohttp's StreamReader for MultipartReader over an already-read body (the
    idempotency middleware reads the body before the handler runs)."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    async def read(self, n: int = -1) -> bytes:
        end = len(self.data) if n < 0 else min(len(self.data), self.pos + n)
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    async def readline(self, max_line_length: int | None = None) -> bytes:
        idx = self.data.find(b"\n", self.pos)
        end = len(self.data) if idx < 0 else idx + 1
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def at_eof(self) -> bool:
        return self.pos >= len(self.data)

    def unread_data(self, data: bytes) -> None:
        self.pos -= len(data)


def _name(request: web.Request) -> str:
    name = request.match_info["name"]
    if not NAME_RE.fullmatch(name) or ".." in name:
        raise InvalidRequest(f"'{name}' is not a valid agent name", [{"loc": "path.name", "msg": "invalid name"}])
    return name


def _owned(row: Any, request: web.Request, what: str, ident: str) -> Any:
    if row is None:
        raise NotFound("snapshot", ident, f"{what} not found")
    if row["tenant_id"] != request["tenant_id"]:
        raise Forbidden(f"snapshot '{row['id']}' belongs to another tenant")
    return row


async def _multipart(request: web.Request):
    from aiohttp import MultipartReader

    if request.content_type != "multipart/form-data":
        raise UnsupportedMediaType(
            f"expected multipart/form-data with parts 'metadata' (JSON) and 'bundle' (.tar.gz), got {request.content_type or 'none'}"
        )
    cached = getattr(request, "_read_bytes", None)
    try:
        if cached is not None:
            return MultipartReader(request.headers, _BytesStream(cached))  # type: ignore[arg-type]
        return await request.multipart()
    except ValueError as exc:  # no boundary, or a malformed one
        raise InvalidRequest(f"malformed multipart/form-data request: {exc}", [{"loc": "body", "msg": "malformed multipart"}])


@routes.post(
    R.UPLOAD_AGENT,
    "Upload an agent snapshot (multipart: metadata JSON + bundle .tar.gz); a new version of its name",
    typed=True,
    errors=(409,),
)
async def upload_agent(request: web.Request) -> Snapshot:
    settings = request.app[SETTINGS]
    limit = settings.max_upload_bytes
    snaps = get_store(request.app)
    reader = await _multipart(request)
    meta_raw: bytes | None = None
    tmp: Path | None = None
    size = 0
    hasher = hashlib.sha256()
    try:
        while True:
            part = await reader.next()
            if part is None:
                break
            if part.name == "metadata":
                meta_raw = bytes(await part.read())
                if len(meta_raw) > 1024 * 1024:
                    raise InvalidRequest("metadata part is larger than 1 MiB")
            elif part.name == "bundle":
                if tmp is not None:
                    raise InvalidRequest("more than one 'bundle' part")
                tmp = snaps.blobs.temp_file()
                with tmp.open("wb") as fh:
                    while True:
                        chunk = await part.read_chunk(1 << 20)
                        if not chunk:
                            break
                        size += len(chunk)
                        if size > limit:
                            raise PayloadTooLarge(limit)
                        hasher.update(chunk)
                        await asyncio.to_thread(fh.write, chunk)
            else:
                await part.release()
        if meta_raw is None:
            raise InvalidRequest("missing multipart part 'metadata' (JSON {name, entrypoint, runtime?, tag?, auth?})",
                                 [{"loc": "metadata", "msg": "field required"}])
        if tmp is None or size == 0:
            raise InvalidRequest("missing or empty multipart part 'bundle' (.tar.gz)", [{"loc": "bundle", "msg": "field required"}])
        meta_data = decode_json(meta_raw, "multipart part 'metadata'", "metadata")
        if not isinstance(meta_data, dict):
            raise InvalidRequest("metadata must be a JSON object")
        try:
            meta = SnapshotMetadata.model_validate(meta_data)
        except ValidationError as exc:
            errors = pydantic_errors(exc, "metadata")
            raise InvalidRequest(f"{errors[0]['loc']}: {errors[0]['msg']}", errors)
        try:
            files = await asyncio.to_thread(inspect_bundle, tmp, limit * UNPACK_FACTOR)
        except BundleError as exc:
            details = [{"loc": "bundle", "msg": str(exc), **({"member": exc.member} if exc.member else {})}]
            raise InvalidRequest(str(exc), details)
        hexdigest = hasher.hexdigest()
        await asyncio.to_thread(snaps.blobs.adopt, tmp, hexdigest)
        tmp = None
        row, error = await snaps.save(request["tenant_id"], meta, hexdigest, size, files)
        if error:
            raise Conflict(error, state="version_limit")
        return await snaps.body(row)
    except ApiError:
        raise
    except (ValueError, AssertionError, HttpProcessingError) as exc:  # malformed multipart framing or part headers
        raise InvalidRequest(f"malformed multipart body: {getattr(exc, 'message', None) or exc}")
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


@routes.get(R.LIST_AGENTS, "List agents: the latest snapshot of each name")
async def list_agents(request: web.Request) -> Page[Snapshot]:
    snaps = get_store(request.app)
    page = page_of(await agent_rows.latest_page(request.app[STORE], request["tenant_id"], *page_params(request)), lambda r: r)
    page.items = [b.model_dump(mode="json") for b in await snaps.bodies(page.items)]
    return page


@routes.get(R.AGENT_LATEST, "The latest snapshot of an agent", typed=True, path_params=NAME_PARAM)
async def agent_latest(request: web.Request) -> Snapshot:
    name = _name(request)
    snaps = get_store(request.app)
    row = _owned(await snaps.latest(request["tenant_id"], name), request, f"agent '{name}'", name)
    return await snaps.body(row)


@routes.get(R.AGENT_BY_TAG, "Resolve an agent snapshot by tag", typed=True, path_params=TAG_PARAM)
async def agent_by_tag(request: web.Request) -> Snapshot:
    name, tag = _name(request), request.match_info["tag"]
    snaps = get_store(request.app)
    row = await snaps.by_tag(request["tenant_id"], name, tag)
    return await snaps.body(_owned(row, request, f"agent '{name}' has no tag '{tag}'", f"{name}:{tag}"))


@routes.get(R.AGENT_BY_VERSION, "Resolve an agent snapshot by version number", typed=True,
            path_params=NAME_PARAM)
async def agent_by_version(request: web.Request) -> Snapshot:
    name, raw = _name(request), request.match_info["version"]
    if not raw.isdigit() or int(raw) < 1:
        raise InvalidRequest(f"version must be a positive integer, got {raw!r}", [{"loc": "path.version", "msg": "expected a positive integer"}])
    snaps = get_store(request.app)
    row = await snaps.by_version(request["tenant_id"], name, int(raw))
    return await snaps.body(_owned(row, request, f"agent '{name}' has no version {raw}", f"{name}@{raw}"))


@routes.get(R.AGENT_VERSIONS, "Every version of one agent, newest first", path_params=NAME_PARAM)
async def agent_versions(request: web.Request) -> Page[Snapshot]:
    name = _name(request)
    snaps = get_store(request.app)
    if not await snaps.name_exists(request["tenant_id"], name):
        raise NotFound("agent", name)
    page = page_of(await agent_rows.version_page(request.app[STORE], request["tenant_id"], name, *page_params(request)),
                   lambda r: r)
    page.items = [b.model_dump(mode="json") for b in await snaps.bodies(page.items)]
    return page


@routes.get(R.GET_SNAPSHOT, "A snapshot by its content-addressed id", typed=True)
async def get_snapshot(request: web.Request) -> Snapshot:
    sid = request.match_info["snapshot_id"]
    snaps = get_store(request.app)
    row = _owned(await snaps.by_id(sid), request, f"snapshot '{sid}'", sid)
    return await snaps.body(row)


@routes.delete(R.DELETE_SNAPSHOT, "Delete one snapshot version; frees the bundle when no other version uses it")
async def delete_snapshot(request: web.Request) -> web.Response:
    sid = request.match_info["snapshot_id"]
    snaps = get_store(request.app)
    row = _owned(await snaps.by_id(sid), request, f"snapshot '{sid}'", sid)
    await snaps.delete(row)
    return web.Response(status=204)
