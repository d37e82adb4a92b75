"""Dataset operations over the store: create, add a version of records (atomically, within the
limits), read a version, diff two versions."""
from __future__ import annotations

from typing import Any

from daemon.contract.datasets import MAX_DATASETS, MAX_RECORDS, MAX_VERSIONS
from daemon.datasets.records import prepare, version_digest
from daemon.errors import Conflict
from daemon.store import datasets as store_ds
from daemon.store.db import Store
from daemon.util import new_id, now_iso


def dataset_body(row: Any) -> dict[str, Any]:
    return {"id": row["id"], "user_id": row["tenant_id"], "name": row["name"], "description": row["description"],
            "version": row["version"], "record_count": row["record_count"], "digest": row["digest"],
            "created_at": row["created_at"], "updated_at": row["updated_at"]}


async def create(store: Store, tenant_id: str, name: str, description: str | None) -> dict[str, Any]:
    dataset_id = new_id("ds_")
    if not await store_ds.create(store, dataset_id=dataset_id, tenant_id=tenant_id, name=name, description=description,
                                 digest=version_digest([]), now=now_iso(), limit=MAX_DATASETS):
        raise Conflict(f"this tenant already has {MAX_DATASETS} datasets, the limit; delete one first", "dataset_limit",
                       limit=MAX_DATASETS)
    return dataset_body(await store_ds.get(store, dataset_id))


async def add_records(store: Store, row: Any, body: Any) -> dict[str, Any]:
    """One new version with the records of `body`, or nothing at all (400/413/409)."""
    prepared = prepare(body)
    dataset_id = row["id"]
    ids = [new_id("rec_") for _ in prepared]
    now = now_iso()
    async with store.transaction() as tx:
        current = await store_ds.current_version(tx, dataset_id)
        if current is None:
            raise Conflict(f"dataset '{dataset_id}' was deleted", "deleted")
        new_version = current + 1
        if new_version > MAX_VERSIONS:
            raise Conflict(f"dataset '{dataset_id}' has {MAX_VERSIONS} versions, the limit: no record was added",
                           "version_limit", limit=MAX_VERSIONS)
        keys = [p.key for p in prepared if p.key is not None]
        replaced = await store_ds.live_keys(tx, dataset_id, keys) if keys else {}
        total = await store_ds.record_count(tx, dataset_id, current) + len(prepared) - len(replaced)
        if total > MAX_RECORDS:
            raise Conflict(f"records: version {new_version} would hold {total} records, more than {MAX_RECORDS}: no record was added",
                           "record_limit", limit=MAX_RECORDS, errors=[{"loc": "records", "msg": f"{total} records"}])
        gone = set(replaced.values())
        digests = [digest for seq, digest in await store_ds.live_digests(tx, dataset_id) if seq not in gone]
        digests += [p.digest for p in prepared]
        digest = version_digest(digests)
        await store_ds.add_version(
            tx, dataset_id=dataset_id, tenant_id=row["tenant_id"], new_version=new_version,
            rows=[(ids[i], p.key, p.input, p.expected, p.metadata, p.tags, p.digest) for i, p in enumerate(prepared)],
            replaced=list(replaced.values()), record_count=total, added=len(prepared), digest=digest, now=now,
        )
    return {"added": len(prepared), "replaced": len(replaced), "version": new_version, "record_count": total,
            "digest": digest, "ids": ids}


def check_version(row: Any, number: int | None, loc: str = "query.version") -> int:
    from daemon.errors import InvalidRequest

    number = number or row["version"]
    if number > row["version"]:
        raise InvalidRequest(f"{loc}: dataset '{row['id']}' has versions 1 to {row['version']}, not {number}",
                             [{"loc": loc, "msg": f"at most {row['version']}"}])
    return number


async def diff(store: Store, row: Any, start: int, end: int, limit: int) -> dict[str, Any]:
    """Records only in `end` (added), only in `start` (removed), and keys on both sides with other
    content (modified). Only (id, key, digest) of the changed records are read to pair them; whole
    records only for the `limit` listed of each kind."""
    added = await store_ds.changed(store, row["id"], end, start)
    removed = await store_ds.changed(store, row["id"], start, end)
    before = {r["key"]: r for r in removed if r["key"] is not None}
    paired = {r["key"] for r in added if r["key"] in before}
    modified = [(before[r["key"]]["id"], r["id"]) for r in added if r["key"] in paired and before[r["key"]]["digest"] != r["digest"]]
    added_only = [r["id"] for r in added if r["key"] not in paired]
    removed_only = [r["id"] for r in removed if r["key"] not in paired]
    listed = added_only[:limit] + removed_only[:limit] + [i for pair in modified[:limit] for i in pair]
    rows = await store_ds.records_by_id(store, listed)
    body = lambda record_id: store_ds.record_body(rows[record_id])  # noqa: E731
    counts = {"added": len(added_only), "removed": len(removed_only), "modified": len(modified)}
    return {
        "dataset_id": row["id"], "from_version": start, "to_version": end,
        "added": [body(i) for i in added_only[:limit]],
        "removed": [body(i) for i in removed_only[:limit]],
        "modified": [{"key": rows[a]["key"], "before": body(b), "after": body(a)} for b, a in modified[:limit]],
        "counts": counts, "truncated": any(n > limit for n in counts.values()),
    }
