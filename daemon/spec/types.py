"""Building blocks shared by the spec models: the strict base model and annotated field types.

Every validator here raises ``ValueError`` with a message written for the person editing the YAML;
the loader shows it verbatim next to the key's path and line.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    WithJsonSchema,
)

from .durations import format_duration, format_size, parse_duration, parse_size

__all__ = [
    "SpecModel",
    "Duration",
    "ByteSize",
    "ImageRef",
    "Identifier",
    "NonEmptyStr",
    "EnvName",
    "EnvValue",
    "EnvMap",
    "Argv",
    "ServiceName",
    "WorkspacePath",
    "Port",
    "Seed",
    "check_image_ref",
    "is_valid_env_name",
]


class SpecModel(BaseModel):
    """Base of every model a user writes in a spec: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --- durations and sizes -------------------------------------------------------------------------

_DURATION_JSON_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": r"^\s*(\d+(\.\d+)?(ms|s|m|h|d))+\s*$|^\s*\d+(\.\d+)?\s*$"},
        {"type": "number", "minimum": 0},
    ],
    "description": "Duration: seconds as a number, or a string like '90s', '5m', '1h30m', '250ms'.",
}

Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
    WithJsonSchema(_DURATION_JSON_SCHEMA),
]
"""Seconds as ``float`` in Python; written as ``"5m"`` in JSON."""

ByteSize = Annotated[
    int,
    BeforeValidator(parse_size),
    PlainSerializer(format_size, return_type=str, when_used="json"),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*[kmgtKMGT]?(i?[bB])?\s*$"},
                {"type": "integer", "minimum": 0},
            ],
            "description": "Size in bytes, or a string like '512m', '1g' (binary units).",
        }
    ),
]
"""Bytes as ``int`` in Python; written as ``"1g"`` in JSON."""


# --- strings -------------------------------------------------------------------------------------


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


NonEmptyStr = Annotated[str, AfterValidator(_non_empty)]

_IDENTIFIER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _identifier(value: str) -> str:
    if not _IDENTIFIER_RE.fullmatch(value) or ".." in value:
        raise ValueError(
            f"invalid identifier '{value}': use letters, digits, '-', '_' and '.' "
            "(starting with a letter or digit, at most 128 characters, no '/' and no '..')"
        )
    return value


Identifier = Annotated[str, AfterValidator(_identifier)]

_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_valid_env_name(name: str) -> bool:
    return bool(_ENV_NAME_RE.fullmatch(name))


def _env_name(value: str) -> str:
    if not is_valid_env_name(value):
        raise ValueError(
            f"invalid environment variable name '{value}': use letters, digits and '_', "
            "not starting with a digit"
        )
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]


def _env_value(value: object) -> object:
    # YAML turns `PORT: 5432` and `DEBUG: true` into numbers and booleans; env values are strings.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


EnvValue = Annotated[
    str,
    BeforeValidator(_env_value),
    WithJsonSchema({"type": ["string", "number", "boolean"]}),
]
EnvMap = dict[EnvName, EnvValue]


def _argv(value: object) -> object:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"cannot split command {value!r}: {exc}") from None
        if not argv:
            raise ValueError("must not be empty")
        return argv
    if isinstance(value, list) and not value:
        raise ValueError("must not be empty")
    return value


Argv = Annotated[
    list[str],
    BeforeValidator(_argv),
    WithJsonSchema(
        {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}],
            "description": "Exec-form argument list, or a string split the way a shell would.",
        }
    ),
]
"""An exec-form argument list; a string is split with :func:`shlex.split`."""

_SERVICE_NAME_RE = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")


def _service_name(value: str) -> str:
    if not _SERVICE_NAME_RE.fullmatch(value):
        raise ValueError(
            f"service name '{value}' is not DNS-safe: use lowercase letters, digits and '-', "
            "starting with a letter and not ending with '-' (at most 63 characters)"
        )
    return value


ServiceName = Annotated[str, AfterValidator(_service_name)]


def _workspace_path(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    parts = value.replace("\\", "/").split("/")
    if ".." in parts:
        raise ValueError(f"path '{value}' must not contain '..'")
    if value.startswith("/") and not (value == "/workspace" or value.startswith("/workspace/")):
        raise ValueError(f"path '{value}' must be relative to the workspace or start with /workspace/")
    return value


WorkspacePath = Annotated[str, AfterValidator(_workspace_path)]
"""A path inside the sandbox workspace: ``out/a.txt`` or ``/workspace/out/a.txt``; no ``..``."""


def _port(value: int) -> int:
    if not 1 <= value <= 65535:
        raise ValueError(f"port {value} is out of range (1-65535)")
    return value


Port = Annotated[int, AfterValidator(_port)]


def _seed(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected an integer or a string, got {value!r}")
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be empty")
    return value


Seed = Annotated[int | str, BeforeValidator(_seed)]


# --- image references ----------------------------------------------------------------------------

_IMAGE_RE = re.compile(
    r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?"  # registry host[:port]
    r"(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)+"  # path components
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"  # tag
    r"(@sha256:[a-f0-9]{64})?"  # digest
)


def check_image_ref(value: str) -> str:
    """Validate a fully-qualified image reference (``registry/path[:tag][@sha256:...]``)."""
    ref = value.strip()
    if not ref:
        raise ValueError("image reference must not be empty")
    first, sep, rest = ref.partition("/")
    qualified = bool(sep) and ("." in first or ":" in first or first == "localhost")
    if not qualified:
        suggestion = f"docker.io/library/{ref}" if not sep else f"docker.io/{ref}"
        raise ValueError(
            f"image reference '{value}' must be fully qualified with a registry, e.g. {suggestion}"
        )
    if not _IMAGE_RE.fullmatch(ref):
        raise ValueError(
            f"invalid image reference '{value}': expected registry/name[:tag][@sha256:digest] "
            "with a lowercase name"
        )
    return ref


ImageRef = Annotated[str, AfterValidator(check_image_ref)]
