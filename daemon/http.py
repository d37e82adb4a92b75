"""Route registry and request helpers shared by every API module.

Each API module builds a `Routes` table; `app.py` mounts them all and `openapi.py` describes them
from the same pydantic models that validate the requests, so the document cannot drift.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from daemon.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
M = TypeVar("M", bound=BaseModel)


@dataclass
class RouteInfo:
    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    auth: bool = True
    query: dict[str, str] = field(default_factory=dict)
    content_types: tuple[str, ...] = ("application/json",)
    paginated: bool = False
    stream: str | None = None  # "text/event-stream" or "application/x-ndjson"


class Routes:
    def __init__(self, tag: str):
        self.tag = tag
        self.items: list[RouteInfo] = []

    def route(self, method: str, path: str, summary: str, **options: Any) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.items.append(RouteInfo(method, path, handler, summary, self.tag, **options))
            return handler

        return register

    def get(self, path: str, summary: str, **options: Any):
        return self.route("GET", path, summary, **options)

    def post(self, path: str, summary: str, **options: Any):
        return self.route("POST", path, summary, **options)

    def put(self, path: str, summary: str, **options: Any):
        return self.route("PUT", path, summary, **options)

    def delete(self, path: str, summary: str, **options: Any):
        return self.route("DELETE", path, summary, status=options.pop("status", 204), **options)


def pydantic_errors(exc: ValidationError, prefix: str = "") -> list[dict[str, Any]]:
    errors = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"])
        if prefix:
            loc = f"{prefix}.{loc}" if loc else prefix
        errors.append({"loc": loc, "msg": err["msg"]})
    return errors


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; 415 on another content type, 400 on malformed JSON."""
    if request.content_type != "application/json":
        raise UnsupportedMediaType(f"expected content type application/json, got {request.content_type or 'none'}")
    raw = await read_bytes(request)
    if not raw.strip():
        raise InvalidRequest("request body is empty; expected a JSON object")
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidRequest(f"malformed JSON body: {exc}")


async def read_bytes(request: web.Request) -> bytes:
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(request.app["settings"].max_body_bytes)


async def parse_body(request: web.Request, model: type[M], allow_empty: bool = False) -> M:
    if allow_empty and not request.can_read_body:
        data: Any = {}
    else:
        data = await read_json(request)
    if not isinstance(data, dict):
        raise InvalidRequest("request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = pydantic_errors(exc)
        first = errors[0]
        raise InvalidRequest(f"{first['loc'] or 'body'}: {first['msg']}", errors)


def parse_query(request: web.Request, model: type[M]) -> M:
    try:
        return model.model_validate(dict(request.query))
    except ValidationError as exc:
        errors = pydantic_errors(exc, "query")
        raise InvalidRequest(f"{errors[0]['loc']}: {errors[0]['msg']}", errors)


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    return value


def json_response(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(to_jsonable(value), status=status, headers=headers, dumps=_dumps)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


# Pagination: newest first, the cursor is the opaque encoding of the last row's `seq`.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def page_params(request: web.Request) -> tuple[int, int | None]:
    raw_limit = request.query.get("limit", str(DEFAULT_LIMIT))
    try:
        limit = int(raw_limit)
    except ValueError:
        raise InvalidRequest(f"query.limit: expected an integer, got {raw_limit!r}", [{"loc": "query.limit", "msg": "expected an integer"}])
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"query.limit: must be between 1 and {MAX_LIMIT}", [{"loc": "query.limit", "msg": f"must be between 1 and {MAX_LIMIT}"}])
    cursor = request.query.get("cursor")
    if not cursor:
        return limit, None
    try:
        return limit, int(base64.urlsafe_b64decode(cursor.encode() + b"==").decode())
    except Exception:
        raise InvalidRequest("query.cursor: not a cursor this server issued", [{"loc": "query.cursor", "msg": "invalid cursor"}])


def encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(str(seq).encode()).decode().rstrip("=")


def page_body(items: list[Any], last_seq: int | None, limit: int, fetched: int) -> dict[str, Any]:
    """`fetched` is how many rows the query returned when asked for limit + 1."""
    more = fetched > limit
    return {
        "items": to_jsonable(items[:limit]),
        "next_cursor": encode_cursor(last_seq) if more and last_seq is not None else None,
        "count": min(len(items), limit),
    }


async def paginate(
    store: Any, sql: str, params: list[Any], request: web.Request, to_item: Callable[[Any], Any]
) -> dict[str, Any]:
    """Run `sql` (which must select `seq` and end with a WHERE clause ready for AND) newest first."""
    limit, after = page_params(request)
    if after is not None:
        sql += " AND seq < ?"
        params = [*params, after]
    rows = await store.fetchall(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit + 1])
    kept = rows[:limit]
    last_seq = kept[-1]["seq"] if kept else None
    return page_body([to_item(r) for r in kept], last_seq, limit, len(rows))
