"""Shapes shared by every resource: the error body, pages, common query parameters."""
from __future__ import annotations

from typing import Annotated, Any, Callable, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, GetJsonSchemaHandler, WithJsonSchema

T = TypeVar("T")

# Path parameter ids (sandbox, run, key, webhook ... ids): what the daemon accepts in a path segment.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@+=~-]{0,199}$"
# Opaque pagination cursor: the decimal position of the last item of the previous page (empty: the
# first page).
CURSOR_PATTERN = r"^[0-9]{0,18}$"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000

# Any JSON value a client sends, as the one JSON decoder takes it (daemon.http.decode_json): an
# integer written without a fraction or exponent is 64-bit (SQLite's integer), arrays and objects
# nest at most 128 deep. A number written with one (1e30) is a float and may be as large as a double.
INT64_MAX = 2**63 - 1
JSON_VALUE_NOTE = ("any JSON value; integers (written without a fraction or exponent) are 64-bit, from -2^63 to 2^63-1, at "
                   "any depth; arrays and objects nest at most 128 levels")
# The OpenAPI components that say so: JsonValue, whose arrays and objects hold JsonValue2, ... down to
# JsonValue0 (any value). Written out a few levels deep, not as one schema that refers to itself:
# common OpenAPI tools (openapi-spec-validator, code generators) loop forever on such a schema.
JSON_VALUE_DEPTH = 3


def json_value_components(depth: int = JSON_VALUE_DEPTH) -> dict[str, dict[str, Any]]:
    components: dict[str, dict[str, Any]] = {"JsonValue0": {"description": JSON_VALUE_NOTE}}
    for level in range(1, depth + 1):
        inner = {"$ref": f"#/components/schemas/JsonValue{level - 1}"}
        components["JsonValue" if level == depth else f"JsonValue{level}"] = {
            "description": JSON_VALUE_NOTE,
            "anyOf": [
                {"type": "null"}, {"type": "boolean"}, {"type": "string"},
                {"type": "integer", "minimum": -INT64_MAX - 1, "maximum": INT64_MAX},
                {"type": "number"},
                {"type": "array", "items": inner},
                {"type": "object", "additionalProperties": inner},
            ],
        }
    return components
# Text with at least one character that is not whitespace as Python's str.isspace() sees it (a JSON
# Schema `\S` means another set of characters).
NOT_BLANK_PATTERN = "[^\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"

# A request field holding any JSON value: validated by the decoder, described by JSON_VALUE_SCHEMA.
# Its schema is a marker that daemon/openapi.py turns into a reference to the JsonValue component
# (pydantic refuses a $ref to a schema it did not generate).
JSON_VALUE_MARK = "x-json-value"
JsonValue = Annotated[Any, WithJsonSchema({JSON_VALUE_MARK: "any"})]
# The same, but not null.
JsonNonNull = Annotated[Any, WithJsonSchema({JSON_VALUE_MARK: "not-null"})]


class Request(BaseModel):
    """A request body or query: unknown keys are refused (400)."""
    model_config = ConfigDict(extra="forbid")


class Query(BaseModel):
    """Query parameters: unknown ones are ignored (a query cannot declare that none other exist)."""
    model_config = ConfigDict(extra="ignore")


class Response(BaseModel):
    """An answer: a key the model does not declare is a contract failure, never dropped silently."""
    model_config = ConfigDict(extra="forbid")


class ErrorBody(Response):
    error: str
    message: str
    request_id: str | None = None
    details: dict[str, Any] | None = None


class PageQuery(Query):
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="items per page")
    cursor: str | None = Field(default=None, pattern=CURSOR_PATTERN, description="next_cursor of the previous page")


class Page(Response, Generic[T]):
    items: list[T]
    next_cursor: str | None
    count: int


class SandboxPoolStats(Response):
    """The warm sandbox pool (daemon/sandbox/pool.py) since the daemon started."""

    enabled: bool
    size: int = Field(description="sandboxes kept per shape (SERVICE_POOL_SIZE)")
    max_total: int = Field(description="bound on pooled sandboxes of all shapes")
    hits: int = Field(description="creates served from the pool")
    misses: int = Field(description="creates of a poolable shape booted cold")
    refills: int = Field(description="sandboxes booted into the pool")
    refill_failures: int
    refill_ms_p50: float | None = Field(description="median time to boot one pooled sandbox (last 256)")
    pooled: dict[str, int] = Field(description="ready pooled sandboxes per shape (sha256 prefix)")
    booting: dict[str, int] = Field(description="pooled sandboxes still booting per shape")
    retry_in_s: dict[str, float] = Field(description="shapes whose pooled boot failed: seconds until the pool tries "
                                                     "again (5 s, doubling per failure in a row, at most 300 s)")


class Health(Response):
    status: Literal["ok"]
    version: str
    sandbox_pool: SandboxPoolStats | None = Field(default=None, description="the warm sandbox pool; null when sandboxes are not set up")


class Empty(Request):
    """No body."""


def _no_nul(value: Any) -> Any:
    """Strings handed to the engine (image, command, workdir, user, env) never carry NUL bytes."""
    texts = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []
    if any("\x00" in t for t in texts if isinstance(t, str)):
        raise ValueError("must not contain NUL bytes")
    return value


def _env_map(value: dict[str, str] | None) -> dict[str, str] | None:
    for name, text in (value or {}).items():
        if not name or "=" in name or "\x00" in name:
            raise ValueError(f"invalid environment variable name {name[:40]!r} (empty, or with '=' or NUL)")
        if "\x00" in text:
            raise ValueError(f"environment variable {name[:40]!r}: the value must not contain NUL bytes")
    return value


NO_NUL_PATTERN = r"^[^\x00]*$"
ENV_NAME_PATTERN = r"^[^=\x00]+$"


def _each(node: Any, kind: str, change: Callable[[dict[str, Any]], None]) -> None:
    """`change` applied to every schema of type `kind` inside `node`."""
    if isinstance(node, list):
        for item in node:
            _each(item, kind, change)
    elif isinstance(node, dict):
        if node.get("type") == kind:
            change(node)
        for value in node.values():
            _each(value, kind, change)


def _strings_without_nul(schema: dict[str, Any]) -> None:
    _each(schema, "string", lambda node: node.setdefault("pattern", NO_NUL_PATTERN))


def _env_names(schema: dict[str, Any]) -> None:
    _each(schema, "object", lambda node: node.setdefault("propertyNames", {"pattern": ENV_NAME_PATTERN}))
    _strings_without_nul(schema)


class _Checked(AfterValidator):
    """A field check (run after the field's own validation) that its JSON Schema states too."""

    state: Callable[[dict[str, Any]], None]

    def __init__(self, func: Callable[[Any], Any], state: Callable[[dict[str, Any]], None]):
        super().__init__(func)
        object.__setattr__(self, "state", state)  # AfterValidator is a frozen dataclass

    def __get_pydantic_json_schema__(self, schema: Any, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        out = handler(schema)
        self.state(out)
        return out


# For request model fields: Annotated[str | None, NoNul], Annotated[dict[str, str] | None, EnvCheck]
NoNul = _Checked(_no_nul, state=_strings_without_nul)
EnvCheck = _Checked(_env_map, state=_env_names)
