"""Agent snapshots: the multipart upload's metadata and the snapshot record."""
from __future__ import annotations

import re
import shlex
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from daemon.contract.common import NOT_BLANK_PATTERN, PageQuery, Response

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# NAME_RE without '..' anywhere, as a JSON Schema pattern (no look-ahead), with maxLength 128
NAME_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9_-]|\.[A-Za-z0-9_-])*\.?$"
NAME_SCHEMA = {"type": "string", "pattern": NAME_PATTERN, "maxLength": 128}
ENV_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
ENV_RE = re.compile(ENV_PATTERN)


def check_name(value: str, what: str) -> str:
    if not NAME_RE.fullmatch(value) or ".." in value:
        raise ValueError(f"invalid {what} '{value}': use letters, digits, '.', '_' and '-' (at most 128, no '..')")
    return value


class ConfigFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, description="where the file is written in the sandbox (relative paths are under /workspace)")
    template: str = Field(description="file content; {{ NAME }} is replaced by the secret NAME")

    @field_validator("path")
    @classmethod
    def _no_dotdot(cls, value: str) -> str:
        if ".." in value.split("/"):
            raise ValueError(f"config file path '{value}' must not contain '..'")
        return value


class SnapshotAuth(BaseModel):
    model_config = ConfigDict(extra="forbid")
    required_env: list[Annotated[str, WithJsonSchema({"type": "string", "pattern": ENV_PATTERN})]] = Field(
        default_factory=list, description="env var names; boot fails when any is missing")
    config_files: list[ConfigFile] = Field(default_factory=list)
    egress: dict[str, list[str]] = Field(default_factory=dict, description="host -> ports, added to the egress allowlist")

    @field_validator("required_env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not ENV_RE.fullmatch(name):
                raise ValueError(f"'{name}' is not a valid environment variable name")
        return value


class SnapshotMetadata(BaseModel):
    """The `metadata` part of `POST /v1/agents`."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(json_schema_extra=NAME_SCHEMA)
    entrypoint: Annotated[list[str] | str, WithJsonSchema({"anyOf": [
        {"type": "array", "minItems": 1, "prefixItems": [{"type": "string", "pattern": NOT_BLANK_PATTERN}], "items": {"type": "string"}},
        {"type": "string", "pattern": NOT_BLANK_PATTERN}]})] = Field(
        description="exec form (array) or a shell-quoted string (quotes balanced); the command is not blank")
    runtime: str | None = None
    tag: Annotated[str, WithJsonSchema(NAME_SCHEMA)] | None = None
    auth: SnapshotAuth | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "agent name")

    @field_validator("tag")
    @classmethod
    def _tag(cls, value: str | None) -> str | None:
        return None if value is None else check_name(value, "tag")

    @field_validator("entrypoint")
    @classmethod
    def _argv(cls, value: list[str] | str) -> list[str]:
        argv = shlex.split(value) if isinstance(value, str) else list(value)
        if not argv or not all(isinstance(a, str) for a in argv) or not argv[0].strip():
            raise ValueError("entrypoint must be a non-empty command")
        return argv


class SnapshotUploadForm(BaseModel):
    """multipart/form-data: a `metadata` part (JSON) and a `bundle` part (.tar.gz)."""

    metadata: SnapshotMetadata
    bundle: bytes = Field(description=".tar.gz rooted at the agent's working directory; extracted to /agent in the sandbox")


class Snapshot(Response):
    id: str
    name: str
    version: int
    tag: str | None = None
    tags: list[str] = Field(default_factory=list)
    digest: str
    size_bytes: int
    storage_path: str
    runtime: str | None = None
    entrypoint: list[str]
    auth: SnapshotAuth | None = None
    created_at: str


AgentPageQuery = PageQuery
