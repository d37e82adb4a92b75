"""The ``webhooks`` and ``webhook_deliveries`` tables: destinations and their delivery log."""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store
from daemon.store.pagination import RowPage, newest_first


async def get(store: Store, hook_id: str) -> Any:
    """The webhook row, or None."""
    return await store.fetchone("SELECT * FROM webhooks WHERE id = ?", (hook_id,))


async def insert(store: Store, *, hook_id: str, tenant_id: str, url: str, events: str, secret: str, created_at: str) -> None:
    """Store a destination (`events` is the JSON list of its events)."""
    await store.execute(
        "INSERT INTO webhooks (id, tenant_id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (hook_id, tenant_id, url, events, secret, created_at),
    )


async def page(store: Store, tenant_id: str, limit: int, after: int | None) -> RowPage:
    """A page (newest first) of the tenant's webhook rows."""
    return await newest_first(store, "SELECT * FROM webhooks WHERE tenant_id = ?", [tenant_id], limit, after)


async def delete(store: Store, hook_id: str) -> int:
    """Delete a destination (its deliveries go with it); the number of rows deleted."""
    return await store.execute("DELETE FROM webhooks WHERE id = ?", (hook_id,))


async def of_tenant(store: Store, tenant_id: str) -> list[Any]:
    """Every webhook row of the tenant, oldest first."""
    return await store.fetchall("SELECT * FROM webhooks WHERE tenant_id = ? ORDER BY seq", (tenant_id,))


# --- deliveries -------------------------------------------------------------------------------------


async def delivery_page(store: Store, hook_id: str, limit: int, after: int | None) -> RowPage:
    """A page (newest first) of a webhook's delivery rows."""
    return await newest_first(store, "SELECT * FROM webhook_deliveries WHERE webhook_id = ?", [hook_id], limit, after)


async def insert_delivery(store: Store, *, delivery_id: str, hook_id: str, tenant_id: str, event: str, payload: str,
                          created_at: str) -> None:
    """Queue a delivery (status pending) of `payload` (JSON text)."""
    await store.execute(
        "INSERT INTO webhook_deliveries (id, webhook_id, tenant_id, event, payload, status, created_at)"
        " VALUES (?, ?, ?, ?, ?, 'pending', ?)",
        (delivery_id, hook_id, tenant_id, event, payload, created_at),
    )


async def pending_ids(store: Store) -> list[Any]:
    """Rows of id: every pending delivery, oldest first."""
    return await store.fetchall("SELECT id FROM webhook_deliveries WHERE status = 'pending' ORDER BY seq")


async def delivery_with_hook(store: Store, delivery_id: str) -> Any:
    """The delivery row with its destination's url and secret, or None."""
    return await store.fetchone(
        "SELECT d.*, w.url, w.secret FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = ?",
        (delivery_id,),
    )


async def record_attempt(store: Store, delivery_id: str, *, status: str, attempts: int, response_status: int | None,
                         error: str | None, at: str, delivered_at: str) -> None:
    """Record an attempt: the delivery's status, attempts, answer and error; `delivered_at` is set
    only when the status is delivered."""
    await store.execute(
        "UPDATE webhook_deliveries SET status = ?, attempts = ?, response_status = ?, error = ?, last_attempt_at = ?,"
        " delivered_at = CASE WHEN ? = 'delivered' THEN ? ELSE delivered_at END WHERE id = ?",
        (status, attempts, response_status, error, at, status, delivered_at, delivery_id),
    )
