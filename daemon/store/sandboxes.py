"""Sandbox rows: state, timestamps and error of every sandbox this daemon created. Secret values are
never stored (only their names). `daemon_meta` holds the daemon's persistent id."""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store, dumps
from daemon.store.pagination import RowPage, newest_first
from daemon.util import new_id, now_iso

COLUMNS = (
    "id", "tenant_id", "daemon_id", "shape", "state", "image", "services", "seed", "spec_id", "spec_version",
    "metadata", "resources", "secret_names", "limits_exceeded", "created_at", "ready_at", "expires_at", "stopped_at",
    "stop_reason", "error_step", "error_message", "boot_pooled", "boot_ms", "node",
)
JSON_COLUMNS = {"services", "metadata", "resources", "secret_names", "limits_exceeded"}


def _encode(field: str, value: Any) -> Any:
    return dumps(value) if field in JSON_COLUMNS else value


async def daemon_id(store: Store) -> str:
    """This daemon's stable id (created on first start, kept in the database)."""
    row = await store.fetchone("SELECT value FROM daemon_meta WHERE key = 'daemon_id'")
    if row is not None:
        return row["value"]
    value = new_id("dmn_", 6)
    await store.execute("INSERT OR IGNORE INTO daemon_meta (key, value) VALUES ('daemon_id', ?)", (value,))
    row = await store.fetchone("SELECT value FROM daemon_meta WHERE key = 'daemon_id'")
    return row["value"]


async def insert(store: Store, row: dict[str, Any]) -> None:
    fields = [c for c in COLUMNS if c in row]
    await store.execute(
        f"INSERT INTO sandboxes ({', '.join(fields)}) VALUES ({', '.join('?' for _ in fields)})",
        [_encode(f, row[f]) for f in fields],
    )


async def update(store: Store, sandbox_id: str, **values: Any) -> None:
    if not values:
        return
    unknown = set(values) - set(COLUMNS)
    if unknown:
        raise ValueError(f"unknown sandbox columns: {sorted(unknown)}")
    await store.execute(
        f"UPDATE sandboxes SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ?",
        [*(_encode(k, v) for k, v in values.items()), sandbox_id],
    )


async def get(store: Store, sandbox_id: str) -> Any:
    return await store.fetchone("SELECT * FROM sandboxes WHERE id = ?", (sandbox_id,))


async def page(store: Store, tenant_id: str, limit: int, after: int | None, *, states: list[str] | None = None,
               spec_id: str | None = None) -> RowPage:
    """A page (newest first) of the tenant's sandbox rows: in one of `states` and of `spec_id` when given."""
    sql = "SELECT * FROM sandboxes WHERE tenant_id = ?"
    params: list[Any] = [tenant_id]
    if states is not None:
        sql += f" AND state IN ({', '.join('?' for _ in states)})"
        params += states
    if spec_id:
        sql += " AND spec_id = ?"
        params.append(spec_id)
    return await newest_first(store, sql, params, limit, after)


async def live_rows(store: Store, daemon: str) -> list[Any]:
    return await store.fetchall(
        "SELECT * FROM sandboxes WHERE daemon_id = ? AND state IN ('creating', 'ready', 'running')", (daemon,)
    )


async def mark_stopped(store: Store, ids: list[str], reason: str) -> None:
    now = now_iso()
    for sandbox_id in ids:
        await store.execute(
            "UPDATE sandboxes SET state = 'stopped', stopped_at = ?, stop_reason = ? WHERE id = ?",
            (now, reason, sandbox_id),
        )


async def delete_tokens(store: Store, sandbox_id: str) -> None:
    await store.execute("DELETE FROM sandbox_tokens WHERE sandbox_id = ?", (sandbox_id,))


async def owner(store: Store, sandbox_id: str) -> str | None:
    """The tenant owning a sandbox, or None when there is no such sandbox."""
    row = await store.fetchone("SELECT tenant_id FROM sandboxes WHERE id = ?", (sandbox_id,))
    return row["tenant_id"] if row else None


async def metadata_of(store: Store, tenant_id: str, sandbox_id: str) -> Any:
    """A row with the `metadata` (JSON text) of one of the tenant's sandboxes, or None."""
    return await store.fetchone("SELECT metadata FROM sandboxes WHERE id = ? AND tenant_id = ?", (sandbox_id, tenant_id))
