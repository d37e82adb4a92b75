"""The ``agent_snapshots`` and ``agent_tags`` tables: versions of agent bundles and the tags that
point at them. Functions taking `tx` run inside the caller's ``Store.transaction()``."""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store, Transaction
from daemon.store.pagination import RowPage, newest_first


async def tags_of(store: Store, snapshot_ids: list[str]) -> list[Any]:
    """Rows of snapshot_id, tag for these snapshots (none asked, none returned)."""
    if not snapshot_ids:
        return []
    marks = ",".join("?" * len(snapshot_ids))
    return await store.fetchall(f"SELECT snapshot_id, tag FROM agent_tags WHERE snapshot_id IN ({marks})", snapshot_ids)


async def version_count(tx: Transaction, tenant_id: str, name: str) -> Any:
    """A row of n (how many versions the agent has) and v (its highest version number, or None)."""
    return await tx.fetchone(
        "SELECT count(*) AS n, max(version) AS v FROM agent_snapshots WHERE tenant_id = ? AND name = ?",
        (tenant_id, name),
    )


async def insert_snapshot(tx: Transaction, *, snapshot_id: str, tenant_id: str, name: str, version: int, tag: str | None,
                          digest: str, size_bytes: int, runtime: str, entrypoint: str, auth: str | None, files: str,
                          created_at: str) -> None:
    """Store a version row (`entrypoint`, `auth`, `files` as JSON text)."""
    await tx.execute(
        "INSERT INTO agent_snapshots (id, tenant_id, name, version, tag, digest, size_bytes, runtime, entrypoint, auth, files, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (snapshot_id, tenant_id, name, version, tag, digest, size_bytes, runtime, entrypoint, auth, files, created_at),
    )


async def move_tag(tx: Transaction, tenant_id: str, name: str, tag: str, snapshot_id: str, updated_at: str) -> None:
    """Point the agent's `tag` at the snapshot (created or moved)."""
    await tx.execute(
        "INSERT INTO agent_tags (tenant_id, name, tag, snapshot_id, updated_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (tenant_id, name, tag) DO UPDATE SET snapshot_id = excluded.snapshot_id, updated_at = excluded.updated_at",
        (tenant_id, name, tag, snapshot_id, updated_at),
    )


async def by_id(store: Store, snapshot_id: str) -> Any:
    """The snapshot row, or None."""
    return await store.fetchone("SELECT * FROM agent_snapshots WHERE id = ?", (snapshot_id,))


async def by_tag(store: Store, tenant_id: str, name: str, tag: str) -> Any:
    """The snapshot row the agent's `tag` points at, or None."""
    return await store.fetchone(
        "SELECT s.* FROM agent_tags t JOIN agent_snapshots s ON s.id = t.snapshot_id"
        " WHERE t.tenant_id = ? AND t.name = ? AND t.tag = ?",
        (tenant_id, name, tag),
    )


async def by_version(store: Store, tenant_id: str, name: str, version: int) -> Any:
    """The snapshot row of one version of the agent, or None."""
    return await store.fetchone(
        "SELECT * FROM agent_snapshots WHERE tenant_id = ? AND name = ? AND version = ?", (tenant_id, name, version)
    )


async def name_exists(store: Store, tenant_id: str, name: str) -> bool:
    """Whether the tenant has any version of an agent called `name`."""
    row = await store.fetchone("SELECT 1 FROM agent_snapshots WHERE tenant_id = ? AND name = ? LIMIT 1", (tenant_id, name))
    return row is not None


async def delete_snapshot(tx: Transaction, snapshot_id: str) -> None:
    """Remove a version row and the tags pointing at it."""
    await tx.execute("DELETE FROM agent_tags WHERE snapshot_id = ?", (snapshot_id,))
    await tx.execute("DELETE FROM agent_snapshots WHERE id = ?", (snapshot_id,))


async def newest_version(tx: Transaction, tenant_id: str, name: str) -> Any:
    """A row with the id of the agent's highest version, or None."""
    return await tx.fetchone(
        "SELECT id FROM agent_snapshots WHERE tenant_id = ? AND name = ? ORDER BY version DESC LIMIT 1",
        (tenant_id, name),
    )


async def tag_latest_if_untagged(tx: Transaction, tenant_id: str, name: str, snapshot_id: str, updated_at: str) -> None:
    """Point `latest` at the snapshot unless the agent already has a `latest`."""
    await tx.execute(
        "INSERT OR IGNORE INTO agent_tags (tenant_id, name, tag, snapshot_id, updated_at) VALUES (?, ?, 'latest', ?, ?)",
        (tenant_id, name, snapshot_id, updated_at),
    )


async def digest_in_use(tx: Transaction, digest: str) -> bool:
    """Whether a snapshot or a spec file still references this blob digest."""
    row = await tx.fetchone(
        "SELECT 1 FROM agent_snapshots WHERE digest = ? UNION ALL SELECT 1 FROM spec_files WHERE digest = ? LIMIT 1",
        (digest, digest),
    )
    return row is not None


async def latest_page(store: Store, tenant_id: str, limit: int, after: int | None) -> RowPage:
    """A page (newest first) of the snapshot rows tagged `latest`: one per agent of the tenant."""
    sql = (
        "SELECT s.* FROM agent_snapshots s JOIN agent_tags t ON t.snapshot_id = s.id AND t.tag = 'latest'"
        " WHERE s.tenant_id = ?"
    )
    return await newest_first(store, sql, [tenant_id], limit, after)


async def version_page(store: Store, tenant_id: str, name: str, limit: int, after: int | None) -> RowPage:
    """A page (newest first) of the snapshot rows of one agent."""
    return await newest_first(store, "SELECT * FROM agent_snapshots WHERE tenant_id = ? AND name = ?", [tenant_id, name],
                              limit, after)
