"""Slack installations, OAuth state nonces and processed event ids (migration 012).

The bot token is stored like the other secrets (daemon/store/secrets.py): readable here for the
Web API calls, never returned by the API and never logged.
"""
from __future__ import annotations

import time
from typing import Any

from daemon.store.db import Store
from daemon.util import now_iso

# Every column but the bot token: what status listings read.
_PUBLIC = "seq, team_id, team_name, tenant_id, app_id, bot_user_id, scope, installed_at, updated_at, last_event_at"


async def upsert_installation(store: Store, *, team_id: str, team_name: str | None, tenant_id: str, app_id: str | None,
                              bot_user_id: str | None, bot_token: str, scope: str | None) -> None:
    """One mapping per workspace: a reinstall by its tenant replaces it (the API refuses another tenant's)."""
    now = now_iso()
    await store.execute(
        "INSERT INTO chat_installations (team_id, team_name, tenant_id, app_id, bot_user_id, bot_token, scope, installed_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (team_id) DO UPDATE SET team_name = excluded.team_name,"
        " tenant_id = excluded.tenant_id, app_id = excluded.app_id, bot_user_id = excluded.bot_user_id,"
        " bot_token = excluded.bot_token, scope = excluded.scope, updated_at = excluded.updated_at",
        (team_id, team_name, tenant_id, app_id, bot_user_id, bot_token, scope, now, now),
    )


async def installation_for_team(store: Store, team_id: str) -> dict[str, Any] | None:
    """The workspace's mapping with its bot token (memory only), or None."""
    row = await store.fetchone("SELECT * FROM chat_installations WHERE team_id = ?", (team_id,))
    return dict(row) if row is not None else None


async def installation_for_tenant(store: Store, tenant_id: str) -> dict[str, Any] | None:
    """The tenant's most recently updated workspace, with its bot token (memory only), or None."""
    row = await store.fetchone(
        "SELECT * FROM chat_installations WHERE tenant_id = ? ORDER BY updated_at DESC, seq DESC LIMIT 1", (tenant_id,))
    return dict(row) if row is not None else None


async def tenant_is(store: Store, tenant_id: str, ref: str) -> bool:
    """Whether `ref` names (by id or name) the tenant `tenant_id`."""
    row = await store.fetchone("SELECT 1 FROM tenants WHERE id = ? AND (id = ? OR name = ?)", (tenant_id, ref, ref))
    return row is not None


async def installations(store: Store, tenant_id: str) -> list[dict[str, Any]]:
    """The tenant's workspaces without their tokens, oldest first."""
    rows = await store.fetchall(f"SELECT {_PUBLIC} FROM chat_installations WHERE tenant_id = ? ORDER BY seq", (tenant_id,))
    return [dict(r) for r in rows]


async def remove_installation(store: Store, team_id: str) -> int:
    """Forgets a workspace (Slack said the app was uninstalled there): its bot token goes with it."""
    return await store.execute("DELETE FROM chat_installations WHERE team_id = ?", (team_id,))


async def touch_event(store: Store, team_id: str) -> None:
    await store.execute("UPDATE chat_installations SET last_event_at = ? WHERE team_id = ?", (now_iso(), team_id))


async def add_state(store: Store, nonce: str, tenant_id: str, expires_at: float) -> None:
    await store.execute("INSERT INTO chat_oauth_states (nonce, tenant_id, expires_at) VALUES (?, ?, ?)",
                        (nonce, tenant_id, expires_at))


async def consume_state(store: Store, nonce: str, tenant_id: str) -> bool:
    """Marks an issued, unexpired, unused state of `tenant_id` used; False when it is not one."""
    now = time.time()
    count = await store.execute(
        "UPDATE chat_oauth_states SET used_at = ? WHERE nonce = ? AND tenant_id = ? AND used_at IS NULL AND expires_at > ?",
        (now, nonce, tenant_id, now),
    )
    return count == 1


async def purge_states(store: Store, older_than: float) -> int:
    return await store.execute("DELETE FROM chat_oauth_states WHERE expires_at < ?", (older_than,))


async def record_event(store: Store, *, event_id: str, message_key: str | None, team_id: str, event_type: str) -> bool:
    """True the first time a delivery is seen; False for a retry or duplicate (same event_id or
    same team:channel:ts)."""
    count = await store.execute(
        "INSERT OR IGNORE INTO chat_events (event_id, message_key, team_id, event_type, received_at) VALUES (?, ?, ?, ?, ?)",
        (event_id, message_key, team_id, event_type, now_iso()),
    )
    return count == 1


async def purge_events(store: Store, before_iso: str) -> int:
    return await store.execute("DELETE FROM chat_events WHERE received_at < ?", (before_iso,))
