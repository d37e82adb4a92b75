"""Alert rules, the notification outbox and its attempt log (SQL only; callers pass a Store or a
Transaction, which answer the same calls)."""
from __future__ import annotations

from typing import Any

from daemon.store.db import dumps, loads

RULE_COLUMNS = ("id", "tenant_id", "name", "eval_id", "condition", "metric", "operator", "threshold", "window", "notify",
                "slack_channel", "webhook_url", "email_to", "secret", "source", "state", "created_at", "last_fired_at")
OUTBOX_COLUMNS = ("id", "tenant_id", "rule_id", "behavior_id", "event", "dedup_key", "experiment_id", "channel",
                  "destination", "payload", "next_attempt_at", "created_at", "routed")


# --- rules ----------------------------------------------------------------------------------------


async def count_rules(db: Any, tenant_id: str) -> int:
    row = await db.fetchone("SELECT COUNT(*) AS n FROM alert_rules WHERE tenant_id = ?", (tenant_id,))
    return row["n"]


async def insert_rule(db: Any, rule: dict[str, Any]) -> None:
    await db.execute(f"INSERT INTO alert_rules ({', '.join(RULE_COLUMNS)}) VALUES ({', '.join('?' * len(RULE_COLUMNS))})",
                     [rule.get(c) for c in RULE_COLUMNS])


async def get_rule(db: Any, rule_id: str) -> Any:
    return await db.fetchone("SELECT * FROM alert_rules WHERE id = ?", (rule_id,))


def list_rules_query(tenant_id: str, eval_id: str | None) -> tuple[str, list[Any]]:
    """SQL for daemon.http.paginate (ends with a WHERE clause)."""
    if eval_id is None:
        return "SELECT * FROM alert_rules WHERE tenant_id = ?", [tenant_id]
    return "SELECT * FROM alert_rules WHERE tenant_id = ? AND eval_id = ?", [tenant_id, eval_id]


async def delete_rule(db: Any, rule_id: str) -> None:
    await db.execute("DELETE FROM alert_rules WHERE id = ?", (rule_id,))


async def rules_for_spec(db: Any, tenant_id: str, spec_id: str) -> list[Any]:
    return await db.fetchall("SELECT * FROM alert_rules WHERE tenant_id = ? AND (eval_id IS NULL OR eval_id = ?) ORDER BY seq",
                             (tenant_id, spec_id))


async def spec_rules(db: Any, tenant_id: str, spec_id: str) -> list[Any]:
    return await db.fetchall("SELECT * FROM alert_rules WHERE tenant_id = ? AND source = 'spec' AND eval_id = ? ORDER BY seq",
                             (tenant_id, spec_id))


DEFINITION = ("name", "condition", "metric", "operator", "threshold", "window", "notify", "slack_channel", "webhook_url", "email_to")


async def set_secret(db: Any, rule_id: str, secret: str) -> None:
    await db.execute("UPDATE alert_rules SET secret = ? WHERE id = ?", (secret, rule_id))


async def redefine_rule(db: Any, rule_id: str, rule: dict[str, Any]) -> None:
    """A rule's definition changes; its id, secret, state and notifications stay."""
    await db.execute(f"UPDATE alert_rules SET {', '.join(f'{c} = ?' for c in DEFINITION)} WHERE id = ?",
                     [*(rule[c] for c in DEFINITION), rule_id])


async def firing_rules(db: Any, tenant_id: str) -> list[Any]:
    return await db.fetchall("SELECT * FROM alert_rules WHERE tenant_id = ? AND state = 'firing' ORDER BY seq", (tenant_id,))


async def set_rule_state(db: Any, rule_id: str, state: str, fired_at: str | None) -> None:
    await db.execute("UPDATE alert_rules SET state = ?, last_fired_at = COALESCE(?, last_fired_at) WHERE id = ?",
                     (state, fired_at, rule_id))


# --- experiments, as evaluation reads them -------------------------------------------------------------


async def experiment(db: Any, experiment_id: str) -> Any:
    return await db.fetchone("SELECT id, tenant_id, name, spec_id, status, summary, finished_at FROM experiments WHERE id = ?",
                             (experiment_id,))


async def last_experiments(db: Any, tenant_id: str, spec_id: str, limit: int, until: str) -> list[Any]:
    """The spec's latest experiments finished by `until` that have metrics, newest first."""
    return await db.fetchall(
        "SELECT id, summary, finished_at FROM experiments WHERE tenant_id = ? AND spec_id = ? AND summary IS NOT NULL"
        " AND finished_at IS NOT NULL AND finished_at <= ? ORDER BY finished_at DESC, seq DESC LIMIT ?",
        (tenant_id, spec_id, until, limit))


async def experiments_since(db: Any, tenant_id: str, spec_id: str, since: str, until: str) -> list[Any]:
    return await db.fetchall(
        "SELECT id, summary, finished_at FROM experiments WHERE tenant_id = ? AND spec_id = ? AND summary IS NOT NULL"
        " AND finished_at >= ? AND finished_at <= ? ORDER BY seq", (tenant_id, spec_id, since, until))


async def finished_since(db: Any, since: str) -> list[str]:
    """Ids of the experiments (every tenant) finished at or after `since`, in finishing order."""
    rows = await db.fetchall("SELECT id FROM experiments WHERE finished_at >= ? AND summary IS NOT NULL ORDER BY finished_at, seq",
                             (since,))
    return [r["id"] for r in rows]


# --- outbox -----------------------------------------------------------------------------------------


async def fired_since(db: Any, rule_id: str, experiment_id: str, since: str) -> bool:
    row = await db.fetchone("SELECT 1 FROM alert_outbox WHERE rule_id = ? AND experiment_id = ? AND event = 'alert.fired'"
                            " AND created_at >= ? LIMIT 1", (rule_id, experiment_id, since))
    return row is not None


async def enqueue(db: Any, row: dict[str, Any]) -> bool:
    """Insert one notification; False when its dedup_key is already queued."""
    values = [dumps(row["payload"]) if c == "payload" else row.get(c) for c in OUTBOX_COLUMNS]
    count = await db.execute(f"INSERT INTO alert_outbox ({', '.join(OUTBOX_COLUMNS)}) VALUES ({', '.join('?' * len(OUTBOX_COLUMNS))})"
                             " ON CONFLICT(dedup_key) DO NOTHING", values)
    return count == 1


async def due(db: Any, now: float, limit: int) -> list[Any]:
    return await db.fetchall("SELECT * FROM alert_outbox WHERE status = 'pending' AND next_attempt_at <= ?"
                             " ORDER BY next_attempt_at, seq LIMIT ?", (now, limit))


async def next_due_at(db: Any) -> float | None:
    row = await db.fetchone("SELECT MIN(next_attempt_at) AS t FROM alert_outbox WHERE status = 'pending'")
    return row["t"]


async def get_outbox(db: Any, outbox_id: str) -> Any:
    return await db.fetchone("SELECT * FROM alert_outbox WHERE id = ?", (outbox_id,))


async def record_attempt(db: Any, outbox_id: str, attempt: int, at: str, response_status: int | None, error: str | None,
                         status: str, next_attempt_at: float) -> None:
    """One attempt's outcome: its log row and the outbox row's new state (call inside a transaction).
    Nothing when the row is gone (its rule or behavior was deleted during the send)."""
    updated = await db.execute("UPDATE alert_outbox SET status = ?, attempts = ?, last_error = ?, response_status = ?,"
                               " next_attempt_at = ?, sent_at = CASE WHEN ? = 'sent' THEN ? ELSE sent_at END WHERE id = ?",
                               (status, attempt, error, response_status, next_attempt_at, status, at, outbox_id))
    if updated:
        await db.execute("INSERT INTO alert_attempts (outbox_id, attempt, at, response_status, error) VALUES (?, ?, ?, ?, ?)",
                         (outbox_id, attempt, at, response_status, error))


async def postpone(db: Any, outbox_id: str, error: str, next_attempt_at: float) -> None:
    """Kept pending without counting an attempt (the channel is not available yet)."""
    await db.execute("UPDATE alert_outbox SET last_error = ?, next_attempt_at = ? WHERE id = ?", (error, next_attempt_at, outbox_id))


async def abandon(db: Any, outbox_id: str, error: str) -> None:
    """Given up without an attempt (its route is gone)."""
    await db.execute("UPDATE alert_outbox SET status = 'failed', last_error = ? WHERE id = ? AND status = 'pending'", (error, outbox_id))


def deliveries_query(column: str, owner_id: str) -> tuple[str, list[Any]]:
    """SQL for daemon.http.paginate: the notifications of a rule (`rule_id`) or behavior (`behavior_id`)."""
    assert column in ("rule_id", "behavior_id")
    return f"SELECT * FROM alert_outbox WHERE {column} = ?", [owner_id]


async def attempts_of(db: Any, outbox_ids: list[str]) -> dict[str, list[Any]]:
    if not outbox_ids:
        return {}
    rows = await db.fetchall(f"SELECT * FROM alert_attempts WHERE outbox_id IN ({', '.join('?' * len(outbox_ids))}) ORDER BY seq",
                             outbox_ids)
    out: dict[str, list[Any]] = {}
    for row in rows:
        out.setdefault(row["outbox_id"], []).append(row)
    return out


def payload_of(row: Any) -> dict[str, Any]:
    return loads(row["payload"], {})


# --- the tenant's default route ------------------------------------------------------------------


async def get_default_route(db: Any, tenant_id: str) -> Any:
    return await db.fetchone("SELECT * FROM alert_default_routes WHERE tenant_id = ?", (tenant_id,))


async def put_default_route(db: Any, route: dict[str, Any]) -> None:
    await db.execute("INSERT INTO alert_default_routes (tenant_id, notify, webhook_url, slack_channel, email_to, secret, updated_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(tenant_id) DO UPDATE SET notify = excluded.notify,"
                     " webhook_url = excluded.webhook_url, slack_channel = excluded.slack_channel, email_to = excluded.email_to,"
                     " secret = excluded.secret, updated_at = excluded.updated_at",
                     [route[c] for c in ("tenant_id", "notify", "webhook_url", "slack_channel", "email_to", "secret", "updated_at")])


async def delete_default_route(db: Any, tenant_id: str) -> bool:
    return await db.execute("DELETE FROM alert_default_routes WHERE tenant_id = ?", (tenant_id,)) == 1
