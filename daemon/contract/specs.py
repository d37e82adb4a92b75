"""Specs: uploads, records, versions. The spec document models stay in daemon/spec."""
from __future__ import annotations

from pydantic import ConfigDict, Field, StrictInt

from daemon.contract.common import PageQuery, Query, Request, Response

# Letters, digits, '.', '_' and '-', first a letter or digit, no '..'; at most SPEC_ID_MAX characters
# (a pattern without look-ahead, so every regex engine reads it alike).
SPEC_ID_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9_-]|\.[A-Za-z0-9_-])*\.?$"
SPEC_ID_MAX = 128
SPEC_ID_SCHEMA = {"type": "string", "pattern": SPEC_ID_PATTERN, "maxLength": SPEC_ID_MAX}


class SpecFileUpload(Request):
    content: str = Field(description="base64")
    mode: StrictInt | None = Field(default=None, ge=0, le=0o777, description="permission bits, e.g. 493 (0755)")


class SpecUpload(Request):
    name: str = Field(min_length=1, max_length=200)
    yaml: str = Field(min_length=1)
    files: dict[str, str | SpecFileUpload] | None = Field(
        default=None,
        description="files named by fixture `path:` entries, by path relative to the spec file: base64 content, or "
                    "{content: base64, mode}; a directory fixture sends every file under it",
    )


class SpecFileInfo(Response):
    path: str
    size: int
    sha256: str


class SpecRecord(Response):
    id: str
    name: str
    version: int
    latest_version: int
    yaml: str
    sha256: str
    created_at: str
    files: list[SpecFileInfo] | None = Field(default=None, description="files uploaded with this version (GET and upload)")


class SpecVersion(Response):
    version: int
    name: str
    sha256: str
    created_at: str


class SpecListQuery(PageQuery):
    name: str | None = Field(default=None, description="exact spec name")


class SpecGetQuery(Query):
    version: int | None = Field(default=None, ge=1, le=2**62, description="spec version (default: the latest)")


class SpecUploadQuery(Query):
    """An upload's only query parameter is `name`: anything else is a mistake, refused (400)."""
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(default=None, max_length=200, description="name of a raw YAML upload")
