"""Spec records and their versions."""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store
from daemon.util import now_iso, sha256_hex


def spec_record(spec_row: Any, version_row: Any) -> dict[str, Any]:
    return {
        "id": spec_row["id"],
        "name": version_row["name"],
        "version": version_row["version"],
        "latest_version": spec_row["latest_version"],
        "yaml": version_row["yaml"],
        "sha256": version_row["sha256"],
        "created_at": version_row["created_at"],
        "first_created_at": spec_row["created_at"],
    }


async def save_version(store: Store, tenant_id: str, spec_id: str, name: str, yaml_text: str) -> tuple[dict, bool]:
    """Store a new version of `spec_id` (the first when new); returns (record, created_new_version).

    Uploading the exact same YAML as the latest version does not add a version."""
    now = now_iso()
    digest = sha256_hex(yaml_text)
    async with store.transaction() as tx:
        row = await tx.fetchone("SELECT * FROM specs WHERE id = ?", (spec_id,))
        if row is None:
            version = 1
            await tx.execute(
                "INSERT INTO specs (id, tenant_id, name, latest_version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (spec_id, tenant_id, name, version, now, now),
            )
        else:
            latest = await tx.fetchone(
                "SELECT * FROM spec_versions WHERE spec_id = ? AND version = ?", (spec_id, row["latest_version"])
            )
            if latest is not None and latest["sha256"] == digest and latest["name"] == name:
                return spec_record(row, latest), False
            version = row["latest_version"] + 1
            await tx.execute(
                "UPDATE specs SET latest_version = ?, name = ?, updated_at = ? WHERE id = ?", (version, name, now, spec_id)
            )
        await tx.execute(
            "INSERT INTO spec_versions (spec_id, version, name, yaml, sha256, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (spec_id, version, name, yaml_text, digest, now),
        )
    return await get(store, spec_id, version), True


async def get(store: Store, spec_id: str, version: int | None = None) -> dict | None:
    row = await store.fetchone("SELECT * FROM specs WHERE id = ?", (spec_id,))
    if row is None:
        return None
    version_row = await store.fetchone(
        "SELECT * FROM spec_versions WHERE spec_id = ? AND version = ?", (spec_id, version or row["latest_version"])
    )
    if version_row is None:
        return None
    record = spec_record(row, version_row)
    record["tenant_id"] = row["tenant_id"]
    return record


async def versions(store: Store, spec_id: str) -> list[dict]:
    rows = await store.fetchall(
        "SELECT version, name, sha256, created_at FROM spec_versions WHERE spec_id = ? ORDER BY version DESC", (spec_id,)
    )
    return [dict(r) for r in rows]


async def delete(store: Store, spec_id: str) -> None:
    await store.execute("DELETE FROM specs WHERE id = ?", (spec_id,))
