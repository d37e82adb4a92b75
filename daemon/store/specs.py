"""Spec records, their versions and the files uploaded with each version.

Spec ids are namespaced per tenant (migration 007): every function takes the tenant, and a tenant
never reads, versions or deletes another tenant's spec of the same id. Files (fixture and SQL files
named by `path:`) live once in the blob store; `spec_files` rows name them per version.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from daemon.store.db import Store
from daemon.store.pagination import RowPage, newest_first
from daemon.util import now_iso, sha256_hex


def spec_record(spec_row: Any, version_row: Any) -> dict[str, Any]:
    return {
        "id": spec_row["id"],
        "tenant_id": spec_row["tenant_id"],
        "name": version_row["name"],
        "version": version_row["version"],
        "latest_version": spec_row["latest_version"],
        "yaml": version_row["yaml"],
        "sha256": version_row["sha256"],
        "created_at": version_row["created_at"],
        "first_created_at": spec_row["created_at"],
    }


class SpecQuotaExceeded(Exception):
    """The tenant already has `limit` spec ids (what == "specs") or `limit` versions of this id
    (what == "versions")."""

    def __init__(self, what: str, limit: int):
        super().__init__(what)
        self.what = what
        self.limit = limit


async def save_version(
    store: Store, tenant_id: str, spec_id: str, name: str, yaml_text: str,
    files: Iterable[Mapping[str, Any]] = (), max_specs: int | None = None, max_versions: int | None = None,
) -> dict:
    """Store a new version of the tenant's `spec_id` (the first when new) with its uploaded files
    (`{path, digest, size, mode}`; the blobs must already be stored). Every upload is a new
    version, identical YAML included. The lookup and the write are one transaction, so concurrent
    uploads of one id get consecutive versions. SpecQuotaExceeded (nothing written) when a new id
    would make more than `max_specs` ids for the tenant, or a new version more than `max_versions`
    of this id."""
    now = now_iso()
    digest = sha256_hex(yaml_text)
    async with store.transaction() as tx:
        row = await tx.fetchone("SELECT latest_version FROM specs WHERE tenant_id = ? AND id = ?", (tenant_id, spec_id))
        if row is None and max_specs is not None:
            count = await tx.fetchone("SELECT COUNT(*) AS n FROM specs WHERE tenant_id = ?", (tenant_id,))
            if count["n"] >= max_specs:
                raise SpecQuotaExceeded("specs", max_specs)
        if row is not None and max_versions is not None:
            count = await tx.fetchone("SELECT COUNT(*) AS n FROM spec_versions WHERE tenant_id = ? AND spec_id = ?",
                                      (tenant_id, spec_id))
            if count["n"] >= max_versions:
                raise SpecQuotaExceeded("versions", max_versions)
        if row is None:
            version = 1
            await tx.execute(
                "INSERT INTO specs (tenant_id, id, name, latest_version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (tenant_id, spec_id, name, version, now, now),
            )
        else:
            version = row["latest_version"] + 1
            await tx.execute(
                "UPDATE specs SET latest_version = ?, name = ?, updated_at = ? WHERE tenant_id = ? AND id = ?",
                (version, name, now, tenant_id, spec_id),
            )
        await tx.execute(
            "INSERT INTO spec_versions (tenant_id, spec_id, version, name, yaml, sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (tenant_id, spec_id, version, name, yaml_text, digest, now),
        )
        rows = [(tenant_id, spec_id, version, f["path"], f["digest"], int(f["size"]), int(f.get("mode") or 0o644)) for f in files]
        if rows:
            await tx.executemany(
                "INSERT INTO spec_files (tenant_id, spec_id, version, path, digest, size, mode) VALUES (?, ?, ?, ?, ?, ?, ?)", rows
            )
    record = await get(store, tenant_id, spec_id, version)
    assert record is not None
    return record


async def get(store: Store, tenant_id: str, spec_id: str, version: int | None = None) -> dict | None:
    """The tenant's spec `spec_id` at `version` (default latest), or None."""
    row = await store.fetchone("SELECT * FROM specs WHERE tenant_id = ? AND id = ?", (tenant_id, spec_id))
    if row is None:
        return None
    version_row = await store.fetchone(
        "SELECT * FROM spec_versions WHERE tenant_id = ? AND spec_id = ? AND version = ?",
        (tenant_id, spec_id, version or row["latest_version"]),
    )
    if version_row is None:
        return None
    return spec_record(row, version_row)


async def versions(store: Store, tenant_id: str, spec_id: str) -> list[dict]:
    rows = await store.fetchall(
        "SELECT version, name, sha256, created_at FROM spec_versions WHERE tenant_id = ? AND spec_id = ? ORDER BY version DESC",
        (tenant_id, spec_id),
    )
    return [dict(r) for r in rows]


async def files(store: Store, tenant_id: str, spec_id: str, version: int) -> dict[str, dict[str, Any]]:
    """The files uploaded with one version: {relative path: {digest, size, mode}}."""
    rows = await store.fetchall(
        "SELECT path, digest, size, mode FROM spec_files WHERE tenant_id = ? AND spec_id = ? AND version = ? ORDER BY path",
        (tenant_id, spec_id, version),
    )
    return {r["path"]: {"digest": r["digest"], "size": r["size"], "mode": r["mode"]} for r in rows}


async def delete(store: Store, tenant_id: str, spec_id: str) -> None:
    """Delete the tenant's spec with every version and file row (the blobs stay: other specs,
    agents or runs may share them)."""
    await store.execute("DELETE FROM specs WHERE tenant_id = ? AND id = ?", (tenant_id, spec_id))


async def latest_page(store: Store, tenant_id: str, limit: int, after: int | None, *, name: str | None = None) -> RowPage:
    """A page (newest first) of the tenant's specs, each a row of its latest version (seq, id,
    latest_version, first_created_at, name, version, yaml, sha256, created_at); only those called
    `name` when given."""
    sql = (
        "SELECT s.seq, s.id, s.latest_version, s.created_at AS first_created_at, v.name, v.version, v.yaml, v.sha256, v.created_at"
        " FROM specs s JOIN spec_versions v ON v.tenant_id = s.tenant_id AND v.spec_id = s.id AND v.version = s.latest_version"
        " WHERE s.tenant_id = ?"
    )
    params: list[Any] = [tenant_id]
    if name:
        sql += " AND v.name = ?"
        params.append(name)
    return await newest_first(store, sql, params, limit, after)
