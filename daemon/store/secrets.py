"""The daemon's own secret store (the `dashboard` secret source): one row per tenant and name.

The HTTP resource (`daemon/api/secrets.py`) writes and lists through these functions; the sandbox
boot (`daemon/sandbox/boot.py`) and the runner (judge key fallback) read values with
`dashboard_secrets`. Values are never returned by the API and never logged.
"""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store
from daemon.util import now_iso

_META = "SELECT name, created_at, updated_at FROM secrets WHERE tenant_id = ?"


async def put(store: Store, tenant_id: str, name: str, value: str) -> dict[str, Any]:
    """Store (or replace) a value; returns its metadata {name, created_at, updated_at}."""
    now = now_iso()
    await store.execute(
        "INSERT INTO secrets (tenant_id, name, value, created_at, updated_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (tenant_id, name, value, now, now),
    )
    return await get(store, tenant_id, name)  # type: ignore[return-value]


async def get(store: Store, tenant_id: str, name: str) -> dict[str, Any] | None:
    """Metadata of one secret (never its value), or None."""
    row = await store.fetchone(_META + " AND name = ?", (tenant_id, name))
    return dict(row) if row is not None else None


async def list_names(store: Store, tenant_id: str) -> list[dict[str, Any]]:
    """Metadata of every secret of the tenant, by name."""
    return [dict(r) for r in await store.fetchall(_META + " ORDER BY name", (tenant_id,))]


async def delete(store: Store, tenant_id: str, name: str) -> bool:
    """Whether a secret was deleted."""
    return bool(await store.execute("DELETE FROM secrets WHERE tenant_id = ? AND name = ?", (tenant_id, name)))


async def dashboard_secrets(store: Store, tenant_id: str) -> dict[str, str]:
    """Every stored value of the tenant, as {name: value} (memory only)."""
    rows = await store.fetchall("SELECT name, value FROM secrets WHERE tenant_id = ?", (tenant_id,))
    return {r["name"]: r["value"] for r in rows}
