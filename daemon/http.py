"""Route registry and request helpers shared by every API module.

Every route is declared once, in the route table (daemon/contract/routes.py: method, path, body,
query, answer, status). Each API module binds its handlers to table entries with a `Routes`;
`app.py` checks the handlers match the table one to one and mounts them, and `openapi.py` describes
them from the same entries and pydantic models that validate the requests, so the document cannot drift.
"""
from __future__ import annotations

import asyncio
import json
import math
import re
import sys
import functools
import inspect
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

from aiohttp import web
from pydantic import BaseModel, RootModel, ValidationError

from daemon.contract.common import Page
from daemon.contract.routes import Route
from daemon.errors import ApiError, InvalidRequest, PayloadTooLarge, UnsupportedMediaType
from daemon.spec import SpecDocument

Handler = Callable[[web.Request], Awaitable[Any]]
M = TypeVar("M", bound=BaseModel)
log = logging.getLogger("svcd")

# Typed application state lives in daemon/appkeys.py (services import it there); re-exported here.
from daemon.appkeys import EVENTS, SETTINGS, STORE  # noqa: E402,F401
# Resources a spec declares (score_rules:, alerts:) are kept in step with its uploads by two hook
# lists, each entry an async hook(app, tenant_id, document) registered in an API module's setup(app):
# a check hook runs before the version is stored and refuses the upload (400/409 naming
# `alerts.N.field`) so nothing is half-saved; a saved hook applies the declarations afterwards.
SpecHook = Callable[[web.Application, str, SpecDocument], Awaitable[None]]  # (app, tenant_id, the uploaded spec)
SPEC_CHECK_HOOKS = web.AppKey("spec_check_hooks", list[SpecHook])
SPEC_SAVED_HOOKS = web.AppKey("spec_saved_hooks", list[SpecHook])


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
    # Query parameters: a request model (parsed by the route wrapper into request["query"]), or a
    # {name: description} map of string parameters the handler reads itself.
    query: dict[str, str] | type[BaseModel] = field(default_factory=dict)
    content_types: tuple[str, ...] = ("application/json",)
    paginated: bool = False
    stream: str | None = None  # "text/event-stream" or "application/x-ndjson"
    # The 2xx answer carries a secret shown once (API key, webhook signing secret); names the
    # resource whose `id` the answer carries. The idempotency middleware then keeps only a marker
    # {resource, id}: a replay answers 409 conflict naming the resource, never the secret again.
    secret_once: str | None = None
    description: str | None = None
    # Status codes the route can answer besides its success and the ones derived from its shape
    # (auth, body, path and query parameters), e.g. 409 on a state conflict, 503 at capacity.
    errors: tuple[int, ...] = ()
    # A stream's item model (one SSE `data:` / NDJSON line each).
    events: type[BaseModel] | None = None
    # Path parameter schemas by name (default: an id, see contract.common.ID_PATTERN).
    path_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Marks a handler written against the contract (it returns a model or a dict, never a
    # json_response). Every handler is wrapped: whatever is not a StreamResponse is validated
    # against `response` and serialised by `render`.
    typed: bool = False
    # Further OpenAPI responses by status (another success in another media type).
    responses: dict[str, Any] = field(default_factory=dict)
    # The route table entry this handler serves (daemon/contract/routes.py).
    route: Route | None = None
    # The handler reads the body itself (a signature over its bytes, events checked one by one);
    # otherwise a JSON object body is parsed into the declared model before the handler runs.
    raw_body: bool = False

    @property
    def parses_body(self) -> bool:
        """The route wrapper parses the body into request["body"] (an instance of `body`)."""
        return (self.body is not None and not self.raw_body and self.content_types == ("application/json",)
                and not issubclass(self.body, RootModel))

    @property
    def query_model(self) -> type[BaseModel] | None:
        return self.query if isinstance(self.query, type) else None

    @property
    def answer_model(self) -> type[BaseModel] | None:
        if self.response is None:
            return None
        return Page[self.response] if self.paginated else self.response  # type: ignore[name-defined,valid-type]


# Every handler's route entry, in mounting order (what the OpenAPI document describes).
ROUTE_INFOS = web.AppKey("route_infos", list[RouteInfo])


class ResponseContractError(ApiError):
    """An answer that does not match its declared model: a bug, never sent as it is."""
    status, code = 500, "internal_error"


# SERVICE_RESPONSE_VALIDATION=warn logs a mismatch and sends the answer unvalidated; the default
# (strict) answers 500 so tests and development catch the drift.
def _strict_responses() -> bool:
    return os.environ.get("SERVICE_RESPONSE_VALIDATION", "strict") != "warn"


def render(info: RouteInfo, value: Any, status: int | None = None, headers: dict[str, str] | None = None) -> web.Response:
    """`value` (a model, or a dict/list of plain data) validated against the route's declared
    answer model and serialised. A dict keeps exactly its keys (unset defaults are not added)."""
    model = info.answer_model
    if model is None:
        return json_response(value, status=status or info.status, headers=headers)
    if isinstance(value, model):
        data = value.model_dump(mode="json")
    else:
        raw = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        try:
            # an answer model that did not choose (extra "ignore") would drop undeclared keys: forbid them
            item = info.response if info.paginated else model
            loose = item is not None and item.model_config.get("extra") in (None, "ignore")
            data = model.model_validate(raw, extra="forbid" if loose else None).model_dump(mode="json", exclude_unset=True)
        except ValidationError as exc:
            errors = pydantic_errors(exc, "response")
            log.error("%s %s: answer does not match %s: %s", info.method, info.path, model.__name__, errors[:5])
            if _strict_responses():
                raise ResponseContractError(f"the answer does not match its declared model {model.__name__}", {"errors": errors})
            data = to_jsonable(raw)
    return web.json_response(data, status=status or info.status, headers=headers, dumps=_dumps)


@dataclass
class Reply:
    """A handler's answer with a status or headers other than the route's default."""
    value: Any
    status: int | None = None
    headers: dict[str, str] | None = None


def _wrap(info: RouteInfo) -> Handler:
    handler = info.handler

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        if info.query_model is not None:
            request["query"] = parse_query(request, info.query_model)
        if info.parses_body:
            request["body"] = await parse_body(request, info.body, allow_empty=info.route is not None and info.route.body_optional)  # type: ignore[arg-type]
        result = await handler(request)
        if isinstance(result, web.StreamResponse):
            return result
        if isinstance(result, Reply):
            return render(info, result.value, result.status, result.headers)
        return render(info, result)

    return wrapped


# What a handler's decorator may add to its table entry: documentation and server behaviour. The
# route's method, path, body, query, answer, status and stream are the table's (daemon/contract/routes.py).
DOC_OPTIONS = frozenset({"summary", "description", "errors", "typed", "auth", "secret_once", "responses", "path_params", "raw_body"})
# An ad-hoc route (a path string instead of a table entry; tests only) declares those here instead.
_ROUTE_OPTIONS = {"body": "body", "query": "query", "response": "answer", "status": "status", "paginated": "paginated",
                  "stream": "stream", "events": "events", "content_types": "content_types"}


def _check_options(route: Route, options: dict[str, Any]) -> None:
    unknown = set(options) - DOC_OPTIONS
    if unknown:
        raise TypeError(f"{route.name}: {sorted(unknown)} are declared in the route table (daemon/contract/routes.py), "
                        f"not on the handler")


def route_info(route: Route, handler: Handler, summary: str, tag: str, **options: Any) -> RouteInfo:
    _check_options(route, options)
    query = route.query_model
    return RouteInfo(route.method, route.path, handler, summary, tag, body=route.body_model, response=route.item_model,
                     status=route.status, query=query if query is not None else {}, content_types=route.content_types,
                     paginated=route.paginated, stream=route.stream, events=route.event_model, route=route, **options)


class Routes:
    """One API module's handlers, each bound to its entry of the route table:

        @routes.get(R.GET_RUN, "A run with its scoring results")
        async def get_run(request): ...
    """

    def __init__(self, tag: str):
        self.tag = tag
        self.items: list[RouteInfo] = []

    def route(self, method: str, route: Route | str, summary: str, **options: Any) -> Callable[[Handler], Handler]:
        if isinstance(route, str):  # an ad-hoc route outside the table (tests); an app refuses to mount one
            table = {_ROUTE_OPTIONS[k]: options.pop(k) for k in list(options) if k in _ROUTE_OPTIONS}
            if method == "DELETE":
                table.setdefault("status", 204)
            route = Route(f"adhoc_{method.lower()}_{route}", method, route, **table)
        elif route.method != method:
            raise TypeError(f"{route.name} is {route.method} {route.path}, bound with routes.{method.lower()}")
        _check_options(route, options)

        def register(handler: Handler) -> Handler:
            info = route_info(route, handler, summary, self.tag, **options)
            info.handler = _wrap(info)
            self.items.append(info)
            return handler

        return register

    def get(self, route: Route | str, summary: str, **options: Any):
        return self.route("GET", route, summary, **options)

    def post(self, route: Route | str, summary: str, **options: Any):
        return self.route("POST", route, summary, **options)

    def put(self, route: Route | str, summary: str, **options: Any):
        return self.route("PUT", route, summary, **options)

    def delete(self, route: Route | str, summary: str, **options: Any):
        return self.route("DELETE", route, summary, **options)


class RouteTableError(RuntimeError):
    """The handlers do not match the route table one to one (raised when the app is built)."""


def check_bindings(infos: list[RouteInfo], table: tuple[Route, ...] | None = None) -> None:
    """Every table route has exactly one handler, every handler serves a table route, and every
    handler is `async def name(request)`; otherwise the app is not built."""
    if table is None:
        from daemon.contract.routes import ALL as table
    problems: list[str] = []
    bound: dict[str, list[RouteInfo]] = {}
    for info in infos:
        route = info.route
        if route is None or table_entry(table, route.name) is not route:
            problems.append(f"{info.method} {info.path} ({_where(info)}) is not an entry of the route table")
            continue
        bound.setdefault(route.name, []).append(info)
        problems += _signature_problems(info)
    for route in table:
        found = bound.get(route.name, [])
        if not found:
            problems.append(f"{route.name} ({route.method} {route.path}) has no handler")
        elif len(found) > 1:
            problems.append(f"{route.name} ({route.method} {route.path}) has {len(found)} handlers: "
                            + ", ".join(_where(i) for i in found))
    if problems:
        raise RouteTableError("the handlers do not match daemon/contract/routes.py:\n  " + "\n  ".join(problems))


def table_entry(table: tuple[Route, ...], name: str) -> Route | None:
    return next((route for route in table if route.name == name), None)


def _where(info: RouteInfo) -> str:
    handler = getattr(info.handler, "__wrapped__", info.handler)
    return f"{handler.__module__}.{handler.__qualname__}"


def _signature_problems(info: RouteInfo) -> list[str]:
    handler = getattr(info.handler, "__wrapped__", info.handler)
    if not inspect.iscoroutinefunction(handler):
        return [f"{_where(info)} ({info.route.name}) is not an async function"]  # type: ignore[union-attr]
    params = list(inspect.signature(handler).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required_rest = [p for p in params[1:] if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if not positional or required_rest:
        return [f"{_where(info)} ({info.route.name}) must take exactly one argument, the request"]  # type: ignore[union-attr]
    return []


# For request model fields: Annotated[str | None, NoNul], Annotated[dict[str, str] | None, EnvCheck]
# (defined with the contract models, re-exported here)
from daemon.contract.common import EnvCheck, NoNul  # noqa: E402,F401


def pydantic_errors(exc: ValidationError, prefix: str = "") -> list[dict[str, Any]]:
    errors = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"])
        if prefix:
            loc = f"{prefix}.{loc}" if loc else prefix
        errors.append({"loc": loc, "msg": err["msg"]})
    return errors


# The one JSON-decoding path for everything a client sends (bodies, multipart parts, OTLP/JSON).
# Nesting is capped well below what the parser, pydantic and json.dumps survive, so a value that
# was accepted can always be stored and served again.
MAX_JSON_DEPTH = 128
from daemon.contract.common import INT64_MAX  # noqa: E402  (what SQLite stores as an integer)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _int64(text: str) -> int:
    value = int(text)
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise ValueError(f"number {text[:40]} is out of range (integers are 64-bit)")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def json_depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when `value` nests lists/objects deeper than `limit` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        items = node.values() if type(node) is dict else node
        for item in items:
            if type(item) is dict or type(item) is list:
                stack.append((item, depth + 1))
    return False


def decode_json(raw: bytes | str, what: str = "body", loc: str = "body") -> Any:
    """`raw` as JSON, or 400 invalid_request naming what is wrong with it: empty, not UTF-8,
    malformed, nested deeper than MAX_JSON_DEPTH, a number too large, NaN/Infinity."""
    if not raw or not raw.strip():
        raise InvalidRequest(f"{what} is empty; expected JSON", [{"loc": loc, "msg": "empty"}])
    try:
        value = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_int64)
    except RecursionError:
        raise InvalidRequest(f"{what} is nested too deeply (more than {MAX_JSON_DEPTH} levels of arrays/objects)",
                             [{"loc": loc, "msg": f"nested deeper than {MAX_JSON_DEPTH} levels"}])
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"{what} is not valid UTF-8: {exc}", [{"loc": loc, "msg": "invalid UTF-8"}])
    except ValueError as exc:
        text = str(exc)
        if "integer string conversion" in text:
            raise InvalidRequest(f"{what} has a number that is too large (more than {sys.get_int_max_str_digits()} digits)",
                                 [{"loc": loc, "msg": "number too large"}])
        if "out of range" in text:
            raise InvalidRequest(f"{what} has a number that is out of range: {text}", [{"loc": loc, "msg": "number out of range"}])
        raise InvalidRequest(f"malformed JSON {what}: {text[:300]}", [{"loc": loc, "msg": "malformed JSON"}])
    if isinstance(value, (dict, list)) and _may_nest(raw) and json_depth_exceeds(value):
        raise InvalidRequest(f"{what} is nested too deeply (more than {MAX_JSON_DEPTH} levels of arrays/objects)",
                             [{"loc": loc, "msg": f"nested deeper than {MAX_JSON_DEPTH} levels"}])
    if _may_have_surrogates(raw) and _has_lone_surrogate(value):
        # "\ud800" alone decodes to a str that cannot be encoded (not stored, not logged, not sent)
        raise InvalidRequest(f"{what} has a string with an unpaired UTF-16 surrogate escape (\\ud800-\\udfff)",
                             [{"loc": loc, "msg": "unpaired surrogate"}])
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _may_have_surrogates(raw: bytes | str) -> bool:
    if isinstance(raw, str):
        return _SURROGATE.search(raw) is not None or "\\ud" in raw.lower()
    return b"\\ud" in raw.lower()


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if type(node) is str:
            if _SURROGATE.search(node):
                return True
        elif type(node) is dict:
            stack.extend(node.keys())
            stack.extend(node.values())
        elif type(node) is list:
            stack.extend(node)
    return False


def _may_nest(raw: bytes | str) -> bool:
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{") > MAX_JSON_DEPTH
    return raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH


async def read_json(request: web.Request) -> Any:
    """The request body as JSON; 415 on another content type, 400 on malformed JSON."""
    if request.content_type != "application/json":
        raise UnsupportedMediaType(f"expected content type application/json, got {request.content_type or 'none'}")
    raw = await read_bytes(request)
    if not raw.strip():
        raise InvalidRequest("request body is empty; expected a JSON object")
    if len(raw) > OFF_LOOP_BYTES:  # a big body takes a while to decode: off the event loop
        return await asyncio.to_thread(decode_json, raw)
    return decode_json(raw)


# Request bodies larger than this are decoded and validated in a worker thread, so a big body
# (a spec, a trace batch) never stalls the event loop (and /health) while it is parsed.
OFF_LOOP_BYTES = 256 * 1024


async def read_bytes(request: web.Request) -> bytes:
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(request.app[SETTINGS].max_body_bytes)


async def parse_body(request: web.Request, model: type[M], allow_empty: bool = False) -> M:
    if allow_empty and not request.can_read_body:
        data: Any = {}
    else:
        data = await read_json(request)
    if not isinstance(data, dict):
        raise InvalidRequest("request body must be a JSON object")
    try:
        if request.content_length is not None and request.content_length > OFF_LOOP_BYTES:
            return await asyncio.to_thread(model.model_validate, data)
        return model.model_validate(data)
    except ValidationError as exc:
        errors = pydantic_errors(exc)
        first = errors[0]
        raise InvalidRequest(f"{first['loc'] or 'body'}: {first['msg']}", errors)


def parse_query(request: web.Request, model: type[M]) -> M:
    data: dict[str, Any] = {}
    for name in request.query.keys():
        values = request.query.getall(name)
        if len(values) > 1:
            raise InvalidRequest(f"query.{name}: given more than once", [{"loc": f"query.{name}", "msg": "given more than once"}])
        data[name] = values[0]
    try:
        return model.model_validate(data)
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


# Pagination: newest first, the cursor is the opaque encoding of the last row's `seq`. The keyset
# query and the cursor codec are the store's (daemon/store/pagination.py); reading `limit`/`cursor`
# from a request and the page body are the web layer's.
from daemon.store.pagination import DEFAULT_LIMIT, MAX_LIMIT, RowPage, decode_cursor, encode_cursor, newest_first  # noqa: E402,F401


def page_params(request: web.Request) -> tuple[int, int | None]:
    parsed = request.get("query")
    if isinstance(parsed, BaseModel) and hasattr(parsed, "limit") and hasattr(parsed, "cursor"):
        return parsed.limit, decode_cursor(parsed.cursor) if parsed.cursor else None  # type: ignore[attr-defined]
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
    return limit, decode_cursor(cursor)


def page_body(items: list[Any], last_seq: int | None, limit: int, fetched: int) -> Page[Any]:
    """`fetched` is how many rows the query returned when asked for limit + 1. Built unvalidated: the
    route's answer model (Page[X]) validates it as it is sent (render)."""
    more = fetched > limit
    return Page[Any].model_construct(
        items=to_jsonable(items[:limit]),
        next_cursor=encode_cursor(last_seq) if more and last_seq is not None else None,
        count=min(len(items), limit),
    )


def page_of(page: RowPage, to_item: Callable[[Any], Any]) -> Page[Any]:
    """The page body of a store RowPage, each row shaped by `to_item`."""
    return page_body([to_item(r) for r in page.rows], page.last_seq, page.limit, page.fetched)


async def paginate(
    store: Any, sql: str, params: list[Any], request: web.Request, to_item: Callable[[Any], Any]
) -> Page[Any]:
    """Run `sql` (which must select `seq` and end with a WHERE clause ready for AND) newest first."""
    return page_of(await newest_first(store, sql, params, *page_params(request)), to_item)
