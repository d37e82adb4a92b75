"""Invariant checks: one model per ``check.type``, joined in the :data:`Check` discriminated union."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from .blocks import DbOperation, EffectBound
from .types import Duration, NonEmptyStr, ServiceName, SpecModel, WorkspacePath

__all__ = [
    "CommandExitCheck",
    "FileExistsCheck",
    "FileAbsentCheck",
    "FileContentCheck",
    "SqlCheck",
    "HttpMockAssertion",
    "HttpMockAssertionsCheck",
    "CustomCheck",
    "LlmAsJudgeCheck",
    "EffectsCheck",
    "Check",
    "CHECK_TYPES",
]


def _compile_regex(value: str) -> str:
    """Compiled as the check runs it (daemon.bounded: the `regex` package, re-compatible syntax)."""
    import regex

    from daemon.bounded import compile_pattern

    try:
        compile_pattern(value)
    except (regex.error, re.error, ValueError, OverflowError, RecursionError) as exc:
        raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
    return value


Isolation = Annotated[Literal["agent", "clean"], Field(description=(
    "where a command check runs: `agent` (the default) in the agent's container after its processes are stopped, "
    "the run `errored` with reason `environment_tampered` when the agent replaced or shadowed a program or library "
    "of the image; `clean` in a fresh verifier container from the spec's image with the workspace and services "
    "attached and nothing the agent wrote outside /workspace"))]


class CommandExitCheck(SpecModel):
    """Passes when ``command`` (run by the daemon's own ``sh -c`` in /workspace) exits with ``expect_exit_code``."""

    type: Literal["command_exit"]
    command: NonEmptyStr
    expect_exit_code: int = Field(default=0, ge=0, le=255)
    timeout: Duration | None = None
    isolation: Isolation = "agent"


class FileExistsCheck(SpecModel):
    """Passes when ``path`` (workspace-relative) exists."""

    type: Literal["file_exists"]
    path: WorkspacePath


class FileAbsentCheck(SpecModel):
    """Passes when ``path`` (workspace-relative) does not exist."""

    type: Literal["file_absent"]
    path: WorkspacePath


class FileContentCheck(SpecModel):
    """Passes when the file at ``path`` contains a substring, matches a regex or equals a text
    (exactly one of ``contains``, ``regex``, ``equals``)."""

    type: Literal["file_content"]
    path: WorkspacePath
    contains: str | None = None
    regex: str | None = None
    equals: str | None = None

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        return None if value is None else _compile_regex(value)

    @model_validator(mode="after")
    def _exactly_one(self) -> FileContentCheck:
        given = [k for k in ("contains", "regex", "equals") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "file_content needs exactly one of contains, regex, equals"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self


class SqlCheck(SpecModel):
    """Runs ``query`` against a postgres ``service``. Exactly one expectation:
    ``expect_rows`` (row count), ``expect_scalar`` (the first column of the first row) or
    ``expect`` (the full result: a list of rows, each a list of values or a column->value map)."""

    type: Literal["sql"]
    service: ServiceName
    query: NonEmptyStr
    expect_rows: int | None = Field(default=None, ge=0)
    expect_scalar: Any = None
    expect: list[Any] | None = None

    @field_validator("expect")
    @classmethod
    def _rows_shape(cls, value: list[Any] | None) -> list[Any] | None:
        if value is not None:
            for i, row in enumerate(value):
                if not isinstance(row, (list, dict)):
                    raise ValueError(
                        f"row {i} must be a list of values or a mapping of column to value, got {row!r}"
                    )
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> SqlCheck:
        given = [k for k in ("expect_rows", "expect") if getattr(self, k) is not None]
        # `expect_scalar: null` is a real expectation (a NULL result), unless another one is set:
        # a dumped check carries `expect_scalar: null` next to the one it uses.
        if self.expect_scalar is not None or ("expect_scalar" in self.model_fields_set and not given):
            given.append("expect_scalar")
        if len(given) != 1:
            raise ValueError(
                "sql check needs exactly one of expect_rows, expect_scalar, expect"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self


class HttpMockAssertion(SpecModel):
    """A request-count assertion on a recording ``http_mock`` service: ``count`` (exact), or
    ``min_count`` and/or ``max_count``; ``body_contains`` narrows to requests whose body has it."""

    method: str = "GET"
    path: NonEmptyStr
    count: int | None = Field(default=None, ge=0)
    min_count: int | None = Field(default=None, ge=0)
    max_count: int | None = Field(default=None, ge=0)
    body_contains: str | None = None

    @field_validator("method")
    @classmethod
    def _upper(cls, value: str) -> str:
        method = value.strip().upper()
        if not re.fullmatch(r"[A-Z]+", method):
            raise ValueError(f"invalid HTTP method {value!r}")
        return method

    @field_validator("path")
    @classmethod
    def _slash(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"path '{value}' must start with '/'")
        return value

    @model_validator(mode="after")
    def _counts(self) -> HttpMockAssertion:
        if self.count is not None and (self.min_count is not None or self.max_count is not None):
            raise ValueError("use either count, or min_count/max_count, not both")
        if self.count is None and self.min_count is None and self.max_count is None:
            raise ValueError("needs one of count, min_count, max_count")
        if self.min_count is not None and self.max_count is not None and self.min_count > self.max_count:
            raise ValueError(f"min_count ({self.min_count}) is greater than max_count ({self.max_count})")
        return self


class HttpMockAssertionsCheck(SpecModel):
    """Assertions on the requests a recording ``http_mock`` service received."""

    type: Literal["http_mock_assertions"]
    service: ServiceName
    assertions: list[HttpMockAssertion] = Field(min_length=1)


class CustomCheck(SpecModel):
    """Runs ``command`` in /workspace; its stdout is JSON ``{passed, score?, evidence?}``."""

    type: Literal["custom"]
    command: NonEmptyStr
    timeout: Duration | None = None
    isolation: Isolation = "agent"


class LlmAsJudgeCheck(SpecModel):
    """A model grades the workspace ``inputs`` against ``rubric``; passes at ``threshold``."""

    type: Literal["llm_as_judge"]
    rubric: NonEmptyStr
    model: str | None = None
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    inputs: list[WorkspacePath] = Field(default_factory=list)


class EffectsCheck(SpecModel):
    """Passes when the agent's effect ledger stays within every bound: ``db: {TABLE: {insert|update|
    delete|ddl: BOUND}}`` the rows it wrote (DDL: its statements), ``http: {HOST: {METHOD: BOUND}}``
    the calls it made through the egress proxy (``*``: any method); a BOUND is a count N (at most N)
    or ``"<op> N"``, as in ``forbidden.effects``. Its evidence names each bound and the measured value.
    The bounds turn on the db audit and the proxy's HTTP record they read."""

    type: Literal["effects"]
    db: dict[NonEmptyStr, dict[DbOperation, EffectBound]] | None = None
    http: dict[NonEmptyStr, dict[NonEmptyStr, EffectBound]] | None = None

    @model_validator(mode="after")
    def _some_bound(self) -> EffectsCheck:
        if not self.db and not self.http:
            raise ValueError("an effects check needs at least one bound under db or http")
        return self


Check = Annotated[
    CommandExitCheck
    | FileExistsCheck
    | FileAbsentCheck
    | FileContentCheck
    | SqlCheck
    | HttpMockAssertionsCheck
    | CustomCheck
    | LlmAsJudgeCheck
    | EffectsCheck,
    Field(discriminator="type"),
]

CHECK_TYPES: tuple[str, ...] = (
    "command_exit",
    "file_exists",
    "file_absent",
    "file_content",
    "sql",
    "http_mock_assertions",
    "custom",
    "llm_as_judge",
    "effects",
)


def sees_effects(invariants: Any, kind: str) -> bool:
    """Whether an `effects` check among `invariants` (name -> Invariant) bounds `kind` (db or http)."""
    return any(getattr(inv.check, "type", None) == "effects" and getattr(inv.check, kind) for inv in (invariants or {}).values())
