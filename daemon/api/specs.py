"""Specs: upload (JSON shape A or raw YAML shape B), versions, read, delete.

Spec ids are namespaced per tenant: every lookup here takes the caller's tenant, so another tenant's
spec of the same id is simply not there (404), and uploading an id another tenant uses creates the
caller's own spec.

Files named by a fixture's `path:` are never read from the daemon's host: the client reads them
relative to the spec file and sends them with the spec (shape A `files: {relative path: base64}`
or `{relative path: {content: base64, mode}}`). They are stored once in the blob store
(blobs/sha256) and referenced by the spec version; a sandbox applies its fixtures from those blobs.
A spec whose path fixture was not uploaded (a raw YAML upload, for one) is refused with a 400.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import re
from typing import Any

from aiohttp import web

from daemon.contract.common import Page
from daemon.contract.specs import (
    SPEC_ID_MAX,
    SPEC_ID_PATTERN,
    SPEC_ID_SCHEMA,
    SpecRecord,
    SpecUpload,
    SpecVersion,
)
from daemon.caps import check_caps
from daemon.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge, UnsupportedMediaType
from daemon.contract import routes as R
from daemon.http import SETTINGS, SPEC_CHECK_HOOKS, SPEC_SAVED_HOOKS, STORE, Routes, json_response, page_of, page_params, parse_body, read_bytes
from daemon.spec import SpecDocument, SpecValidationError, load_spec
from daemon.store import specs as spec_store

routes = Routes("specs")
YAML_TYPES = ("application/x-yaml", "text/yaml", "application/yaml", "text/x-yaml")
SAFE_ID = re.compile(SPEC_ID_PATTERN)
SPEC_ID_PARAM = {"spec_id": SPEC_ID_SCHEMA}
# Files uploaded with one spec version (decoded bytes, all files together; the request body limit
# applies to the base64 text on top of this).
SPEC_FILES_MAX_BYTES = 20 * 1024 * 1024
SPEC_FILES_MAX_COUNT = 2000
UPLOAD_HINT = ("upload the spec with the svc CLI (`svc specs upload SPEC.yaml`, `svc eval run SPEC.yaml`), which reads "
               "fixture files relative to the spec file and sends them with it")


def validate_yaml(text: str, source: str) -> SpecDocument:
    try:
        return load_spec(text, source)
    except SpecValidationError as err:
        issues = err.details()["errors"]
        raise InvalidRequest(f"spec is invalid: {str(err).splitlines()[0]}" + (f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""), issues)


def check_id(spec_id: str) -> str:
    if len(spec_id) > SPEC_ID_MAX or not SAFE_ID.fullmatch(spec_id):
        raise InvalidRequest(f"'{spec_id}' is not a valid spec id", [{"loc": "path.spec_id", "msg": "invalid id"}])
    return spec_id


async def owned_spec(request: web.Request, spec_id: str, version: int | None = None) -> dict:
    """The caller's spec `spec_id` (ids are per tenant: another tenant's spec of that id is a 404)."""
    check_id(spec_id)
    tenant_id = request["tenant_id"]
    record = await spec_store.get(request.app[STORE], tenant_id, spec_id, version)
    if record is None:
        if version is not None and await spec_store.get(request.app[STORE], tenant_id, spec_id):
            raise NotFound("spec", spec_id, f"spec '{spec_id}' has no version {version}")
        raise NotFound("spec", spec_id)
    return record


def _file_key(raw: str) -> str:
    """An uploaded file's path, normalised like a fixture path; 400 when it is not relative."""
    from daemon.spec.services import fixture_path_key

    loc = f"files.{raw}"
    if not raw or "\x00" in raw or len(raw) > 1024:
        raise InvalidRequest(f"{loc}: not a usable file path", [{"loc": loc, "msg": "not a usable file path"}])
    try:
        key = fixture_path_key(raw)
    except ValueError as exc:
        raise InvalidRequest(f"{loc}: {exc}", [{"loc": loc, "msg": str(exc)}])
    if key == ".":
        raise InvalidRequest(f"{loc}: a file needs a name", [{"loc": loc, "msg": "a file needs a name"}])
    return key


def _decode_files(files: dict[str, Any] | None) -> dict[str, tuple[bytes, int]]:
    """{normalised path: (bytes, mode)}; 400 for a bad path or base64, 413 past the size limits."""
    out: dict[str, tuple[bytes, int]] = {}
    total = 0
    if len(files or {}) > SPEC_FILES_MAX_COUNT:
        raise InvalidRequest(f"files: at most {SPEC_FILES_MAX_COUNT} files can be uploaded with a spec",
                             [{"loc": "files", "msg": f"more than {SPEC_FILES_MAX_COUNT} files"}])
    for raw, value in (files or {}).items():
        key = _file_key(raw)
        content, mode = (value, 0o644) if isinstance(value, str) else (value.content, value.mode or 0o644)
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRequest(f"files.{raw}: content is not valid base64", [{"loc": f"files.{raw}", "msg": "invalid base64"}])
        total += len(data)
        if total > SPEC_FILES_MAX_BYTES:
            err = PayloadTooLarge(SPEC_FILES_MAX_BYTES)
            err.message = f"the files uploaded with the spec exceed {SPEC_FILES_MAX_BYTES} bytes together"
            raise err
        if key in out:
            raise InvalidRequest(f"files.{raw}: uploaded twice (as '{key}')", [{"loc": f"files.{raw}", "msg": "duplicate path"}])
        out[key] = (data, mode & 0o777)
    return out


def match_fixture_files(doc: SpecDocument, text: str, uploaded: dict[str, Any]) -> set[str]:
    """Check that every path fixture of `doc` has its file(s) among `uploaded` (normalised paths);
    returns the paths used. A missing one is a 400 naming `fixtures.N.path` (with its line)."""
    from daemon.spec.build import context_uploads
    from daemon.spec.errors import make_issue
    from daemon.spec.services import fixture_path_key
    from daemon.spec.yaml_lines import parse_yaml_with_lines

    used: set[str] = set()
    issues: list[dict[str, Any]] = []
    for index, fixture in enumerate(doc.fixtures):
        raw = getattr(fixture, "path", None)
        if raw is None:
            continue
        key = fixture_path_key(raw)
        if hasattr(fixture, "service"):  # a SQL file: exactly that file
            found = [key] if key in uploaded else []
        else:  # a file, or every file under a directory
            found = [p for p in uploaded if key == "." or p == key or p.startswith(key + "/")]
        if found:
            used.update(found)
            continue
        if not issues:
            lines = parse_yaml_with_lines(text).lines
        issues.append(make_issue(("fixtures", index, "path"), (
            f"fixture file '{raw}' was not uploaded with the spec (the daemon never reads fixture paths on its own "
            f"host); {UPLOAD_HINT}"), lines).as_dict())
    try:
        used |= context_uploads(doc, uploaded)
    except ValueError as exc:
        issues.append(make_issue(("base", "build", "dockerfile"), str(exc), parse_yaml_with_lines(text).lines).as_dict())
    else:
        issues += dockerfile_refusals(doc, text, uploaded)
    if issues:
        raise InvalidRequest(f"spec is invalid: {issues[0]['loc']}: {issues[0]['msg']}"
                             + (f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""), issues)
    return used


def dockerfile_refusals(doc: SpecDocument, text: str, uploaded: dict[str, Any]) -> list[dict[str, Any]]:
    """What the build of `doc`'s Dockerfile base would refuse (daemon/sandbox/build.py), each issue
    at `base.build.dockerfile` naming the Dockerfile's line: a 400 at upload, not a failed run."""
    from daemon.sandbox.build import dockerfile_issues
    from daemon.spec.build import BaseBuild
    from daemon.spec.errors import make_issue
    from daemon.spec.yaml_lines import parse_yaml_with_lines

    base = getattr(doc, "base", None)
    if not isinstance(base, BaseBuild):
        return []
    root, key = base.build.context_dir(), base.build.dockerfile_key()
    entry = uploaded.get(key if root == "." else f"{root}/{key}")
    if entry is None:
        return []
    data = entry[0] if isinstance(entry, tuple) else entry
    found = dockerfile_issues(bytes(data).decode("utf-8", "replace"), base.build.args)
    if not found:
        return []
    lines = parse_yaml_with_lines(text).lines
    return [make_issue(("base", "build", "dockerfile"), f"{base.build.dockerfile} line {line}: {why}", lines).as_dict()
            for line, why in found]


def _file_infos(files: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"path": path, "size": f["size"], "sha256": f["digest"]} for path, f in sorted(files.items())]


@routes.post(
    R.UPLOAD_SPEC,
    "Upload a spec (JSON {name, yaml, files?} or a raw YAML body); every upload of an id (per tenant) is a new version. "
    "Files named by fixture `path:` entries must come in `files` (the CLI sends them)",
    errors=(409, 413),
    typed=True,
    description=("400 names every field over an operator cap (`resources.memory`, `resources.disk`, `resources.pids`, "
                 "`resources.cpus`, any `timeout`: SERVICE_MAX_MEMORY / _DISK / _PIDS / _CPUS / _TIMEOUT) with the value "
                 "asked and the cap. 413 when the spec YAML is over SERVICE_MAX_SPEC_BYTES (1 MiB). 409 `limit_reached` "
                 "when the tenant has SERVICE_MAX_SPECS_PER_TENANT spec ids (a new id) or the id has "
                 "SERVICE_MAX_SPEC_VERSIONS versions."),
)
async def upload_spec(request: web.Request) -> SpecRecord:
    settings = request.app[SETTINGS]
    files: dict[str, Any] | None = None
    if request.content_type in YAML_TYPES:
        if request.content_length is not None and request.content_length > settings.max_spec_bytes:
            raise spec_too_large(settings.max_spec_bytes)  # refused before a byte of it is read
        raw = await read_bytes(request)
        if len(raw) > settings.max_spec_bytes:
            raise spec_too_large(settings.max_spec_bytes)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest("spec YAML must be UTF-8")
        name = request["query"].name
    elif request.content_type == "application/json":
        body = await parse_body(request, SpecUpload)
        text, name, files = body.yaml, body.name, body.files
        if len(text) > settings.max_spec_bytes or len(text.encode("utf-8", "surrogatepass")) > settings.max_spec_bytes:
            raise spec_too_large(settings.max_spec_bytes)
    else:
        raise UnsupportedMediaType(
            f"expected application/json ({{name, yaml}}) or a YAML content type ({', '.join(YAML_TYPES[:2])}), got {request.content_type or 'none'}"
        )
    source = (name or "spec") + ".yaml" if not (name or "").endswith((".yaml", ".yml")) else name
    # Parsing and validating a spec of up to SERVICE_MAX_SPEC_BYTES takes a while: off the event loop.
    doc = await asyncio.to_thread(validate_yaml, text, source)
    await asyncio.to_thread(check_caps, doc, settings, text)
    decoded = await asyncio.to_thread(_decode_files, files) if files else {}
    used = await asyncio.to_thread(match_fixture_files, doc, text, decoded)
    unused = sorted(set(decoded) - used)
    if unused:
        raise InvalidRequest(f"files.{unused[0]}: not named by any fixture path of the spec",
                             [{"loc": f"files.{path}", "msg": "not named by any fixture path of the spec"} for path in unused])
    for check in request.app.get(SPEC_CHECK_HOOKS, []):
        await check(request.app, request["tenant_id"], doc)
    from daemon.agents.blobs import Blobs

    blobs = Blobs(settings.blobs_dir)
    rows = []
    for path, (data, mode) in sorted(decoded.items()):
        digest = await asyncio.to_thread(blobs.put_bytes, data)
        rows.append({"path": path, "digest": digest, "size": len(data), "mode": mode})
    try:
        record = await spec_store.save_version(request.app[STORE], request["tenant_id"], doc.id, name or doc.id, text, rows,
                                               max_specs=settings.max_specs_per_tenant, max_versions=settings.max_spec_versions)
    except spec_store.SpecQuotaExceeded as exc:
        if exc.what == "specs":
            raise Conflict(f"a tenant has at most {exc.limit} specs (SERVICE_MAX_SPECS_PER_TENANT); delete one before "
                           f"uploading a new spec id such as '{doc.id}'", "limit_reached", limit=exc.limit, resource="specs")
        raise Conflict(f"spec '{doc.id}' already has {exc.limit} versions, the most one spec may have "
                       "(SERVICE_MAX_SPEC_VERSIONS); delete the spec or upload under a new id", "limit_reached",
                       limit=exc.limit, resource="spec_versions")
    record["files"] = [{"path": r["path"], "size": r["size"], "sha256": r["digest"]} for r in rows]
    for hook in request.app.get(SPEC_SAVED_HOOKS, []):
        await hook(request.app, request["tenant_id"], doc)
    return _spec_record(record)


def spec_too_large(limit: int) -> PayloadTooLarge:
    err = PayloadTooLarge(limit)
    err.message = f"the spec YAML exceeds {limit} bytes, the most this daemon accepts (SERVICE_MAX_SPEC_BYTES)"
    return err


def _spec_record(record: dict[str, Any], **extra: Any) -> SpecRecord:
    """The declared fields of a stored spec row (the store's bookkeeping columns are not answered)."""
    return SpecRecord(**{k: v for k, v in {**dict(record), **extra}.items() if k in SpecRecord.model_fields})


@routes.get(R.LIST_SPECS, "List specs (filter: name)")
async def list_specs(request: web.Request) -> Page[SpecRecord]:
    rows = await spec_store.latest_page(request.app[STORE], request["tenant_id"], *page_params(request),
                                        name=request["query"].name or None)
    return page_of(rows, _spec_record)


@routes.get(R.GET_SPEC, "Get a spec (latest, or ?version=N)",
            path_params=SPEC_ID_PARAM, typed=True)
async def get_spec(request: web.Request) -> SpecRecord:
    record = await owned_spec(request, request.match_info["spec_id"], request["query"].version)
    files = await spec_store.files(request.app[STORE], request["tenant_id"], record["id"], record["version"])
    return _spec_record(record, files=_file_infos(files))


@routes.get(R.SPEC_VERSIONS, "Every version of a spec, newest first",
            path_params=SPEC_ID_PARAM, typed=True)
async def spec_versions(request: web.Request) -> Page[SpecVersion]:
    record = await owned_spec(request, request.match_info["spec_id"])
    limit, before = page_params(request)  # the cursor is the last version served
    items = [item for item in await spec_store.versions(request.app[STORE], request["tenant_id"], record["id"])
             if before is None or item["version"] < before][:limit + 1]
    more = len(items) > limit
    return Page[SpecVersion](items=items[:limit], next_cursor=str(items[limit - 1]["version"]) if more else None,
                             count=min(len(items), limit))


@routes.delete(R.DELETE_SPEC, "Delete a spec and all its versions", path_params=SPEC_ID_PARAM)
async def delete_spec(request: web.Request) -> web.Response:
    record = await owned_spec(request, request.match_info["spec_id"])
    await spec_store.delete(request.app[STORE], request["tenant_id"], record["id"])
    return web.Response(status=204)


@routes.get(R.GET_SPEC_SCHEMA, "The JSON Schema of spec files (the document `svc spec schema` prints)",
            description="JSON Schema 2020-12, generated from the daemon's spec models: point an editor's YAML "
                        "language server at it (`# yaml-language-server: $schema=...`) or validate spec files with a "
                        "standard validator. `svc spec validate` checks what a schema cannot (references between blocks).")
async def get_spec_schema(request: web.Request) -> web.Response:
    from daemon.spec.schema import spec_json_schema

    return json_response(spec_json_schema())
