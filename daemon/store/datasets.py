"""Datasets, their versions and their append-only records (migrations 011, 015).

A record row is never changed except to stamp `removed_version` when a keyed upsert replaces it;
version N is the one indexed query of `LIVE` below, walked in insertion order.
"""
from __future__ import annotations

from typing import Any, Iterable

from pydantic_core import from_json

from daemon.store.db import Store, Transaction, dumps, loads
from daemon.store.pagination import RowPage, newest_first

LIVE = "r.dataset_id = ? AND r.added_version <= ? AND (r.removed_version IS NULL OR r.removed_version > ?)"
NOT_LIVE = "NOT (r.added_version <= ? AND (r.removed_version IS NULL OR r.removed_version > ?))"
TAGS_ANY = "EXISTS (SELECT 1 FROM json_each(r.tags) t WHERE t.value IN ({marks}))"


# The stored JSON columns are the canonical JSON the daemon wrote, so SQLite can join them into one
# document per record, decoded with one from_json (pydantic's parser, about twice as fast as
# json.loads here) instead of four json.loads: decoding was most of the time of a read.
CONTENT = ("'{\"input\":' || r.input || ',\"expected\":' || coalesce(r.expected, 'null') || ',\"metadata\":' ||"
           " coalesce(r.metadata, 'null') || ',\"tags\":' || r.tags || '}'")
RECORD_COLUMNS = (f"r.seq, r.id, r.dataset_id, r.key, r.added_version, r.removed_version, r.digest, r.created_at,"
                  f" {CONTENT} AS content")


def record_body(row: Any) -> dict[str, Any]:
    """A record row selected with RECORD_COLUMNS, as the API shows it."""
    content = from_json(row["content"])
    return {
        "id": row["id"], "dataset_id": row["dataset_id"], "key": row["key"], "input": content["input"],
        "expected": content["expected"], "metadata": content["metadata"], "tags": content["tags"],
        "version": row["added_version"], "removed_version": row["removed_version"], "digest": row["digest"],
        "created_at": row["created_at"],
    }


async def create(store: Store, *, dataset_id: str, tenant_id: str, name: str, description: str | None, digest: str,
                 now: str, limit: int) -> bool:
    """Insert the dataset at version 1 (no records); False when the tenant already has `limit`."""
    async with store.transaction() as tx:
        row = await tx.fetchone("SELECT COUNT(*) AS n FROM datasets WHERE tenant_id = ?", (tenant_id,))
        if row["n"] >= limit:
            return False
        await tx.execute(
            "INSERT INTO datasets (id, tenant_id, name, description, version, created_at, updated_at) VALUES (?, ?, ?, ?, 1, ?, ?)",
            (dataset_id, tenant_id, name, description, now, now),
        )
        await tx.execute(
            "INSERT INTO dataset_versions (dataset_id, version, record_count, added, replaced, digest, created_at)"
            " VALUES (?, 1, 0, 0, 0, ?, ?)", (dataset_id, digest, now),
        )
    return True


DATASET_SELECT = ("SELECT d.*, v.record_count, v.digest FROM datasets d"
                  " JOIN dataset_versions v ON v.dataset_id = d.id AND v.version = d.version")


async def get(store: Store, dataset_id: str) -> Any:
    return await store.fetchone(DATASET_SELECT + " WHERE d.id = ?", (dataset_id,))


async def page(store: Store, tenant_id: str, limit: int, after: int | None) -> RowPage:
    """A page (newest first) of the tenant's datasets, each with its latest version's record_count and digest."""
    return await newest_first(store, DATASET_SELECT + " WHERE d.tenant_id = ?", [tenant_id], limit, after)


# `seq` is the version number, for the newest-first pagination of store.pagination
VERSIONS_SELECT = "SELECT version AS seq, * FROM dataset_versions WHERE dataset_id = ?"


async def version_page(store: Store, dataset_id: str, limit: int, after: int | None) -> RowPage:
    """A page (newest first) of a dataset's version rows (`seq` is the version number)."""
    return await newest_first(store, VERSIONS_SELECT, [dataset_id], limit, after)


async def current_version(tx: Transaction, dataset_id: str) -> int | None:
    """The dataset's latest version number (inside a transaction), or None when it is gone."""
    row = await tx.fetchone("SELECT version FROM datasets WHERE id = ?", (dataset_id,))
    return None if row is None else row["version"]


async def record_count(tx: Transaction, dataset_id: str, number: int) -> int:
    """How many records version `number` of the dataset holds."""
    row = await tx.fetchone("SELECT record_count FROM dataset_versions WHERE dataset_id = ? AND version = ?", (dataset_id, number))
    return row["record_count"]


def version_body(row: Any) -> dict[str, Any]:
    return {"version": row["version"], "record_count": row["record_count"], "added": row["added"],
            "replaced": row["replaced"], "digest": row["digest"], "created_at": row["created_at"]}


async def version(store: Store, dataset_id: str, number: int) -> Any:
    return await store.fetchone("SELECT * FROM dataset_versions WHERE dataset_id = ? AND version = ?", (dataset_id, number))


async def delete(store: Store, dataset_id: str) -> None:
    """The dataset, its versions and every record (ON DELETE CASCADE)."""
    await store.execute("DELETE FROM datasets WHERE id = ?", (dataset_id,))


async def live_keys(tx: Transaction, dataset_id: str, keys: list[str]) -> dict[str, int]:
    """{key: seq} of the live records holding one of `keys`."""
    found: dict[str, int] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        rows = await tx.fetchall(
            f"SELECT key, seq FROM dataset_records WHERE dataset_id = ? AND removed_version IS NULL AND key IN ({','.join('?' * len(chunk))})",
            (dataset_id, *chunk),
        )
        found.update({r["key"]: r["seq"] for r in rows})
    return found


async def live_digests(tx: Transaction, dataset_id: str) -> list[tuple[int, str]]:
    """(seq, digest) of the current records, in insertion order."""
    rows = await tx.fetchall(
        "SELECT seq, digest FROM dataset_records WHERE dataset_id = ? AND removed_version IS NULL ORDER BY seq", (dataset_id,)
    )
    return [(r["seq"], r["digest"]) for r in rows]


async def add_version(tx: Transaction, *, dataset_id: str, tenant_id: str, new_version: int, rows: Iterable[tuple],
                      replaced: list[int], record_count: int, added: int, digest: str, now: str) -> None:
    """Stamp the replaced records, insert the new ones ((id, key, input, expected, metadata, tags, digest) each)
    and the version row, and move the dataset to `new_version`."""
    for start in range(0, len(replaced), 500):
        chunk = replaced[start:start + 500]
        await tx.execute(f"UPDATE dataset_records SET removed_version = ? WHERE seq IN ({','.join('?' * len(chunk))})",
                         (new_version, *chunk))
    await tx.executemany(
        "INSERT INTO dataset_records (id, dataset_id, tenant_id, key, added_version, input, expected, metadata, tags, digest, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(r[0], dataset_id, tenant_id, r[1], new_version, r[2], r[3], r[4], r[5], r[6], now) for r in rows],
    )
    await tx.execute(
        "INSERT INTO dataset_versions (dataset_id, version, record_count, added, replaced, digest, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (dataset_id, new_version, record_count, added, len(replaced), digest, now),
    )
    await tx.execute("UPDATE datasets SET version = ?, updated_at = ? WHERE id = ?", (new_version, now, dataset_id))


def _tags_clause(tags: list[str] | None) -> tuple[str, list[Any]]:
    if not tags:
        return "", []
    return " AND " + TAGS_ANY.format(marks=",".join("?" * len(tags))), list(tags)


async def records_page(store: Store, dataset_id: str, number: int, tags: list[str] | None, after_seq: int | None,
                       limit: int) -> list[Any]:
    """Up to `limit` + 1 records of version `number` in insertion order, after `after_seq`."""
    where, params = _tags_clause(tags)
    sql = f"SELECT {RECORD_COLUMNS} FROM dataset_records r WHERE {LIVE}{where}"
    args: list[Any] = [dataset_id, number, number, *params]
    if after_seq is not None:
        sql += " AND r.seq > ?"
        args.append(after_seq)
    return await store.fetchall(sql + " ORDER BY r.seq LIMIT ?", [*args, limit + 1])


async def record_ids(store: Store, dataset_id: str, number: int, tags: list[str] | None = None) -> list[str]:
    where, params = _tags_clause(tags)
    rows = await store.fetchall(f"SELECT r.id FROM dataset_records r WHERE {LIVE}{where} ORDER BY r.seq",
                                [dataset_id, number, number, *params])
    return [r["id"] for r in rows]


async def changed(store: Store, dataset_id: str, present: int, absent: int) -> list[Any]:
    """(seq, id, key, digest) of the records live in version `present` and not in `absent`."""
    return await store.fetchall(
        f"SELECT r.seq, r.id, r.key, r.digest FROM dataset_records r WHERE {LIVE} AND {NOT_LIVE} ORDER BY r.seq",
        [dataset_id, present, present, absent, absent],
    )


async def records_by_id(store: Store, ids: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = await store.fetchall(f"SELECT {RECORD_COLUMNS} FROM dataset_records r WHERE r.id IN ({','.join('?' * len(chunk))})", chunk)
        found.update({r["id"]: r for r in rows})
    return found


async def record(store: Store, record_id: str) -> Any:
    return await store.fetchone("SELECT * FROM dataset_records WHERE id = ?", (record_id,))


# --- experiments over a dataset -------------------------------------------------------------------


async def link_experiment(tx: Transaction, experiment_id: str, ref: dict[str, Any]) -> None:
    await tx.execute(
        "INSERT INTO experiment_datasets (experiment_id, dataset_id, version, digest, tags) VALUES (?, ?, ?, ?, ?)",
        (experiment_id, ref["id"], ref["version"], ref["digest"], dumps(ref["tags"]) if ref.get("tags") else None),
    )


async def experiment_dataset(store: Store, experiment_id: str) -> dict[str, Any] | None:
    """{id, version, digest, tags} of the dataset version an experiment ran over, or None."""
    row = await store.fetchone("SELECT * FROM experiment_datasets WHERE experiment_id = ?", (experiment_id,))
    if row is None:
        return None
    return {"id": row["dataset_id"], "version": row["version"], "digest": row["digest"], "tags": loads(row["tags"], None)}
