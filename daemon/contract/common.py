"""Shapes shared by every resource: the error body, pages, common query parameters."""
from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

T = TypeVar("T")

# Path parameter ids (sandbox, run, key, webhook ... ids): what the daemon accepts in a path segment.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@+=~-]{0,199}$"
# Opaque pagination cursor: the decimal position of the last item of the previous page (empty: the
# first page).
CURSOR_PATTERN = r"^[0-9]{0,18}$"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


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


# For request model fields: Annotated[str | None, NoNul], Annotated[dict[str, str] | None, EnvCheck]
NoNul = AfterValidator(_no_nul)
EnvCheck = AfterValidator(_env_map)
