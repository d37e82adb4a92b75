"""The ``tenants``, ``api_keys`` and ``sandbox_tokens`` tables. Secrets are stored only as their
SHA-256 (the caller hashes them)."""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store
from daemon.store.pagination import RowPage, newest_first

# --- tenants ----------------------------------------------------------------------------------------


async def insert_tenant(store: Store, *, tenant_id: str, name: str, is_admin: bool, created_at: str) -> None:
    """Store a tenant."""
    await store.execute(
        "INSERT INTO tenants (id, name, is_admin, created_at) VALUES (?, ?, ?, ?)",
        (tenant_id, name, int(is_admin), created_at),
    )


async def tenant_id_named(store: Store, name: str) -> str | None:
    """The id of the tenant called `name`, or None."""
    row = await store.fetchone("SELECT id FROM tenants WHERE name = ?", (name,))
    return row["id"] if row else None


async def count_tenants(store: Store) -> int:
    """How many tenants the daemon has."""
    row = await store.fetchone("SELECT count(*) AS n FROM tenants")
    return int(row["n"]) if row else 0


async def tenant_exists(store: Store, name: str) -> bool:
    """Whether a tenant is called `name`."""
    return await store.fetchone("SELECT 1 FROM tenants WHERE name = ?", (name,)) is not None


# --- API keys ---------------------------------------------------------------------------------------


async def insert_key(store: Store, *, key_id: str, tenant_id: str, name: str, prefix: str, secret_sha256: str,
                     created_at: str) -> None:
    """Store an API key (its secret as a SHA-256)."""
    await store.execute(
        "INSERT INTO api_keys (id, tenant_id, name, prefix, secret_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (key_id, tenant_id, name, prefix, secret_sha256, created_at),
    )


async def rotate_key(store: Store, key_id: str, *, secret_sha256: str, prefix: str, rotated_at: str) -> None:
    """Replace a key's secret (the old one stops matching at once)."""
    await store.execute(
        "UPDATE api_keys SET secret_sha256 = ?, prefix = ?, rotated_at = ? WHERE id = ?",
        (secret_sha256, prefix, rotated_at, key_id),
    )


async def get_key(store: Store, key_id: str) -> Any:
    """The api_keys row, or None."""
    return await store.fetchone("SELECT * FROM api_keys WHERE id = ?", (key_id,))


async def count_keys(store: Store, tenant_id: str) -> int:
    """How many API keys the tenant has."""
    row = await store.fetchone("SELECT COUNT(*) AS n FROM api_keys WHERE tenant_id = ?", (tenant_id,))
    return row["n"]


async def key_page(store: Store, tenant_id: str, limit: int, after: int | None) -> RowPage:
    """A page (newest first) of the tenant's api_keys rows."""
    return await newest_first(store, "SELECT * FROM api_keys WHERE tenant_id = ?", [tenant_id], limit, after)


async def delete_key(store: Store, key_id: str) -> int:
    """Revoke a key; the number of rows deleted."""
    return await store.execute("DELETE FROM api_keys WHERE id = ?", (key_id,))


async def key_by_secret(store: Store, secret_sha256: str) -> Any:
    """A row of id, tenant_id, is_admin (its tenant's) of the key with this secret hash, or None."""
    return await store.fetchone(
        "SELECT k.id, k.tenant_id, t.is_admin FROM api_keys k JOIN tenants t ON t.id = k.tenant_id"
        " WHERE k.secret_sha256 = ?",
        (secret_sha256,),
    )


# --- sandbox tokens ---------------------------------------------------------------------------------


async def insert_sandbox_token(store: Store, *, secret_sha256: str, sandbox_id: str, tenant_id: str, created_at: str) -> None:
    """Store a sandbox token (as a SHA-256)."""
    await store.execute(
        "INSERT INTO sandbox_tokens (secret_sha256, sandbox_id, tenant_id, created_at) VALUES (?, ?, ?, ?)",
        (secret_sha256, sandbox_id, tenant_id, created_at),
    )


async def sandbox_token(store: Store, secret_sha256: str) -> Any:
    """A row of sandbox_id, tenant_id of the sandbox token with this hash, or None."""
    return await store.fetchone("SELECT sandbox_id, tenant_id FROM sandbox_tokens WHERE secret_sha256 = ?", (secret_sha256,))
