"""The ``idempotency`` table: the answers kept per (tenant, principal, Idempotency-Key) for replay.
`created_at` is a Unix time in seconds."""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store


async def find(store: Store, tenant_id: str, principal: str, key: str, newer_than: float) -> Any:
    """The record of this key created after `newer_than` (Unix seconds), or None."""
    return await store.fetchone(
        "SELECT * FROM idempotency WHERE tenant_id = ? AND principal = ? AND key = ? AND created_at > ?",
        (tenant_id, principal, key, newer_than),
    )


async def save(store: Store, *, tenant_id: str, principal: str, key: str, method: str, path: str, body_sha256: str,
               status: int, content_type: str, body: bytes, created_at: float) -> None:
    """Keep (or replace) the record of this key: the request's hash and the answer to replay."""
    await store.execute(
        "INSERT OR REPLACE INTO idempotency (tenant_id, principal, key, method, path, body_sha256, status, content_type,"
        " body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (tenant_id, principal, key, method, path, body_sha256, status, content_type, body, created_at),
    )


async def purge_older_than(store: Store, cutoff: float) -> int:
    """Delete the records created at or before `cutoff` (Unix seconds); how many were deleted."""
    return await store.execute("DELETE FROM idempotency WHERE created_at <= ?", (cutoff,))
