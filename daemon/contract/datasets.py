"""Datasets and their versioned records (SPEC "Dataset and record", "Endpoints > Datasets")."""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, RootModel, WithJsonSchema, field_validator

from daemon.contract.common import JsonNonNull, JsonValue, PageQuery, Query, Request, Response

MAX_RECORDS = 10_000  # live records in one version
MAX_VERSIONS = 100
MAX_RECORD_BYTES = 64 * 1024
MAX_DATASETS = 1_000  # per tenant
MAX_TAGS = 50
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$"
RECORD_SIZE_RULE = ("a record's size is its compact JSON encoding (keys sorted, separators ',' ':', UTF-8) of the keys "
                    "it sends (input, expected, metadata, tags, key)")


class DatasetCreate(Request):
    name: str = Field(min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=4000)


class RecordIn(Request):
    """One record to add. `key` upserts: the live record with the same key is replaced in the new version."""
    input: JsonNonNull = Field(description="required, any JSON but null: what the agent is given")
    expected: JsonValue = Field(default=None, description="expected outputs, for the checks")
    metadata: dict[str, JsonValue] | None = None
    tags: list[Annotated[str, WithJsonSchema({"type": "string", "pattern": TAG_PATTERN})]] = Field(default_factory=list, max_length=MAX_TAGS)
    key: str | None = Field(default=None, min_length=1, max_length=200, description="upsert key")

    @field_validator("input")
    @classmethod
    def _input(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("input is required and must not be null")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        import re

        for tag in value:
            if not re.fullmatch(TAG_PATTERN, tag):
                raise ValueError(f"invalid tag {tag[:40]!r}: letters, digits and _.:/- (1-100 characters)")
        return value


class RecordBatch(RootModel[list[RecordIn]]):
    """The body of POST /v1/datasets/{id}/records: an array of records, added as one new version."""
    root: list[RecordIn] = Field(min_length=1, max_length=MAX_RECORDS)


class Dataset(Response):
    id: str
    user_id: str = Field(description="the owning tenant")
    name: str
    description: str | None
    version: int = Field(description="latest version; 1 at creation (no records)")
    record_count: int = Field(description="records in the latest version")
    digest: str = Field(description="sha256 of the latest version's records")
    created_at: str
    updated_at: str


class DatasetVersion(Response):
    version: int
    record_count: int
    added: int
    replaced: int = Field(description="records replaced by a keyed upsert in this version")
    digest: str = Field(description="sha256 over the version's records (their content digests, in order)")
    created_at: str


class Record(Response):
    id: str
    dataset_id: str
    key: str | None
    input: Any
    expected: Any
    metadata: dict[str, Any] | None
    tags: list[str]
    version: int = Field(description="the dataset version that added it")
    removed_version: int | None = Field(description="the version that replaced it (keyed upsert); null while current")
    digest: str = Field(description="sha256 of the record's content")
    created_at: str


class RecordsAdded(Response):
    added: int
    replaced: int = Field(description="live records with the same key, replaced in this version")
    version: int = Field(description="the new dataset version")
    record_count: int
    digest: str
    ids: list[str] = Field(description="ids of the added records, in request order")


class RecordQuery(PageQuery):
    version: int | None = Field(default=None, ge=1, le=MAX_VERSIONS, description="default: the latest")
    tags: str | None = Field(default=None, max_length=2000, description="comma-separated; a record with any of them matches")


class DiffQuery(Query):
    from_: int = Field(alias="from", ge=1, le=MAX_VERSIONS, description="the older version")
    to: int | None = Field(default=None, ge=1, le=MAX_VERSIONS, description="default: the latest")
    limit: int = Field(default=100, ge=1, le=1000, description="records listed per change kind")


class ModifiedRecord(Response):
    key: str
    before: Record
    after: Record


class DatasetDiff(Response):
    dataset_id: str
    from_version: int
    to_version: int
    added: list[Record] = Field(description="in `to`, not in `from` (keyed replacements are under `modified`)")
    removed: list[Record]
    modified: list[ModifiedRecord] = Field(description="same key, other content")
    counts: dict[str, int] = Field(description="added, removed, modified: totals before `limit`")
    truncated: bool = Field(description="a list was cut at `limit`")
