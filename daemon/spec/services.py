"""Backing services (``services:``) and seed data (``fixtures:``)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag, field_validator, model_validator

from .types import (
    Argv,
    Duration,
    EnvMap,
    ImageRef,
    NonEmptyStr,
    Port,
    ServiceName,
    SpecModel,
)

__all__ = [
    "DEFAULT_POSTGRES_IMAGE",
    "DEFAULT_REDIS_IMAGE",
    "WaitFor",
    "Healthcheck",
    "MockResponse",
    "MockRoute",
    "PostgresService",
    "RedisService",
    "HttpMockService",
    "GenericService",
    "Service",
    "SERVICE_TYPES",
    "SqlFixture",
    "SqlFileFixture",
    "FileFixture",
    "Fixture",
    "fixture_path_key",
]

DEFAULT_POSTGRES_IMAGE = "localhost/svc/postgres:15"
DEFAULT_REDIS_IMAGE = "localhost/svc/redis:7"


class WaitFor(SpecModel):
    """Boot waits until ``port`` accepts TCP connections and/or ``log`` appears in the service's
    output; boot fails after ``timeout``."""

    port: Port | None = None
    log: str | None = None
    timeout: Duration = 60.0

    @model_validator(mode="after")
    def _something_to_wait_for(self) -> WaitFor:
        if self.port is None and self.log is None:
            raise ValueError("wait_for needs port or log (or both)")
        return self


class Healthcheck(SpecModel):
    """``command`` (run by ``sh -c`` in the service container) must exit 0 within ``retries``
    attempts, ``interval`` apart."""

    command: NonEmptyStr
    interval: Duration = 1.0
    retries: int = Field(default=30, ge=1)


class MockResponse(SpecModel):
    status: int = Field(default=200, ge=100, le=599)
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = ""
    """A string is sent as is; any other value is sent as JSON."""


class MockRoute(SpecModel):
    method: str = "GET"
    path: NonEmptyStr
    response: MockResponse = Field(default_factory=MockResponse)

    @field_validator("method")
    @classmethod
    def _upper(cls, value: str) -> str:
        method = value.strip().upper()
        if not method.isalpha() and method != "*":
            raise ValueError(f"invalid HTTP method {value!r}")
        return method

    @field_validator("path")
    @classmethod
    def _slash(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"path '{value}' must start with '/'")
        return value


class _ServiceBase(SpecModel):
    name: ServiceName
    env: EnvMap = Field(default_factory=dict)
    ports: list[Port] = Field(default_factory=list)
    command: Argv | None = None
    wait_for: WaitFor | None = None
    healthcheck: Healthcheck | None = None
    record: bool = False


class PostgresService(_ServiceBase):
    """A PostgreSQL database (port 5432)."""

    type: Literal["postgres"]
    image: ImageRef = DEFAULT_POSTGRES_IMAGE


class RedisService(_ServiceBase):
    """A Redis cache (port 6379)."""

    type: Literal["redis"]
    image: ImageRef = DEFAULT_REDIS_IMAGE


class HttpMockService(_ServiceBase):
    """The project's mock HTTP server answering ``routes``; ``record: true`` keeps the requests
    for ``http_mock_assertions`` checks. ``image`` is not needed."""

    type: Literal["http_mock"]
    image: ImageRef | None = None
    routes: list[MockRoute] = Field(default_factory=list)


class GenericService(_ServiceBase):
    """Any image. ``type: generic`` may be left out when ``image`` is given."""

    type: Literal["generic"] = "generic"
    image: ImageRef


def _default_service_type(value: object) -> object:
    if isinstance(value, dict) and "type" not in value:
        return {**value, "type": "generic"}
    return value


Service = Annotated[
    PostgresService | RedisService | HttpMockService | GenericService,
    Field(discriminator="type"),
    BeforeValidator(_default_service_type),
]

SERVICE_TYPES: tuple[str, ...] = ("postgres", "redis", "http_mock", "generic")


# --- fixtures ------------------------------------------------------------------------------------


def fixture_path_key(value: str) -> str:
    """The normalised form of a fixture ``path`` (relative to the spec file's directory, '/'
    separators, no ``.`` parts, no trailing '/'; ``"."`` for the directory itself). Raises
    ``ValueError`` when the path is absolute or leaves the spec's directory."""
    text = value.strip().replace("\\", "/")
    if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text):
        raise ValueError(
            f"fixture path '{value}' is absolute: fixture paths are relative to the spec file's directory "
            "(the svc CLI reads the file there and uploads it with the spec)"
        )
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(
            f"fixture path '{value}' leaves the spec's directory ('..' is not allowed): put the file next to the "
            "spec file or below its directory"
        )
    return "/".join(parts) or "."


def _relative_fixture_path(value: str) -> str:
    fixture_path_key(value)
    return value


FixturePath = Annotated[NonEmptyStr, AfterValidator(_relative_fixture_path)]


class SqlFixture(SpecModel):
    """Inline SQL run against a postgres service."""

    service: ServiceName
    sql: NonEmptyStr


class SqlFileFixture(SpecModel):
    """A file of SQL (path relative to the spec file, uploaded with the spec) run against a postgres service."""

    service: ServiceName
    path: FixturePath


class FileFixture(SpecModel):
    """A file or directory (path relative to the spec file, uploaded with the spec) copied into the
    workspace at ``to``."""

    path: FixturePath
    to: str = "/workspace"

    @field_validator("to")
    @classmethod
    def _in_workspace(cls, value: str) -> str:
        parts = value.split("/")
        if ".." in parts:
            raise ValueError(f"'to' path '{value}' must not contain '..'")
        if value.startswith("/") and not (value == "/workspace" or value.startswith("/workspace/")):
            raise ValueError(f"'to' path '{value}' must be inside /workspace")
        return value


def _fixture_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        if "sql" in value:
            return "sql-fixture"
        if "service" in value:
            return "sql-file-fixture"
        return "file-fixture"
    if isinstance(value, SqlFixture):
        return "sql-fixture"
    if isinstance(value, SqlFileFixture):
        return "sql-file-fixture"
    if isinstance(value, FileFixture):
        return "file-fixture"
    return None


Fixture = Annotated[
    Annotated[SqlFixture, Tag("sql-fixture")]
    | Annotated[SqlFileFixture, Tag("sql-file-fixture")]
    | Annotated[FileFixture, Tag("file-fixture")],
    Discriminator(
        _fixture_kind,
        custom_error_type="fixture_shape",
        custom_error_message="a fixture is a mapping: {service, sql}, {service, path} or {path, to?}",
    ),
]
