"""A batch of records as the daemon stores it: validated whole (the first bad record refuses the call,
naming its index and field), each with its canonical JSON, size and content digest."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from daemon.contract.datasets import MAX_RECORD_BYTES, MAX_RECORDS, RecordIn
from daemon.errors import ApiError, InvalidRequest


class RecordTooLarge(ApiError):
    status, code = 413, "payload_too_large"


@dataclass
class Prepared:
    key: str | None
    input: str
    expected: str | None
    metadata: str | None
    tags: str
    digest: str


def canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def record_size(raw: dict[str, Any]) -> int:
    return len(canonical(raw).encode("utf-8"))


def prepare(body: Any) -> list[Prepared]:
    """The records of a request body, or 400/413 naming `records.<index>.<field>`."""
    if not isinstance(body, list):
        raise InvalidRequest("the body must be a JSON array of records", [{"loc": "records", "msg": "expected an array"}])
    if not body:
        raise InvalidRequest("the array of records is empty", [{"loc": "records", "msg": "at least one record"}])
    if len(body) > MAX_RECORDS:
        raise InvalidRequest(f"records: {len(body)} records in one call, more than {MAX_RECORDS}",
                             [{"loc": "records", "msg": f"at most {MAX_RECORDS} records"}])
    prepared: list[Prepared] = []
    keys: dict[str, int] = {}
    for index, raw in enumerate(body):
        loc = f"records.{index}"
        if not isinstance(raw, dict):
            raise InvalidRequest(f"{loc}: a record must be a JSON object", [{"loc": loc, "msg": "expected an object"}])
        try:
            record = RecordIn.model_validate(raw)
        except ValidationError as exc:
            errors = [{"loc": ".".join([loc, *(str(p) for p in e["loc"])]), "msg": e["msg"]} for e in exc.errors()]
            raise InvalidRequest(f"{errors[0]['loc']}: {errors[0]['msg']}", errors)
        size = record_size(raw)
        if size > MAX_RECORD_BYTES:
            field = max(raw, key=lambda name: record_size({name: raw[name]}))
            raise RecordTooLarge(
                f"{loc}: the record is {size} bytes, more than the limit of {MAX_RECORD_BYTES} (64 KB); a record's size is "
                f"its compact JSON (no spaces, keys sorted, UTF-8); {field} is its largest field",
                {"limit_bytes": MAX_RECORD_BYTES, "errors": [{"loc": f"{loc}.{field}", "msg": f"record of {size} bytes"}]},
            )
        if record.key is not None:
            if record.key in keys:
                raise InvalidRequest(f"{loc}.key: key {record.key!r} is also record {keys[record.key]} of this call",
                                     [{"loc": f"{loc}.key", "msg": "duplicate key in one call"}])
            keys[record.key] = index
        content = {"input": record.input, "expected": record.expected, "metadata": record.metadata,
                   "tags": record.tags, "key": record.key}
        prepared.append(Prepared(
            key=record.key, input=canonical(record.input),
            expected=None if record.expected is None else canonical(record.expected),
            metadata=None if record.metadata is None else canonical(record.metadata),
            tags=canonical(record.tags), digest=hashlib.sha256(canonical(content).encode()).hexdigest(),
        ))
    return prepared


def version_digest(record_digests: list[str]) -> str:
    """sha256 over a version's record digests in insertion order (the empty version included)."""
    return hashlib.sha256("\n".join(record_digests).encode()).hexdigest()


