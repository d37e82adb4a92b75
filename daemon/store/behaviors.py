"""Behaviors, their verdicts and latch state (SQL only; a Store or a Transaction as `db`)."""
from __future__ import annotations

from typing import Any

from daemon.store.db import dumps

COLUMNS = ("id", "tenant_id", "name", "description", "kind", "judge_id", "rule_id", "labels", "baseline_pct",
           "baseline_direction", "notify", "slack_channel", "webhook_url", "email_to", "secret", "created_at")


async def insert(db: Any, behavior: dict[str, Any]) -> None:
    values = [dumps(behavior[c]) if c == "labels" and behavior[c] is not None else behavior.get(c) for c in COLUMNS]
    await db.execute(f"INSERT INTO behaviors ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})", values)


async def get(db: Any, behavior_id: str) -> Any:
    return await db.fetchone("SELECT * FROM behaviors WHERE id = ?", (behavior_id,))


def list_query(tenant_id: str) -> tuple[str, list[Any]]:
    return "SELECT * FROM behaviors WHERE tenant_id = ?", [tenant_id]


async def delete(db: Any, behavior_id: str) -> None:
    await db.execute("DELETE FROM behaviors WHERE id = ?", (behavior_id,))


async def breached(db: Any, tenant_id: str) -> list[Any]:
    return await db.fetchall("SELECT * FROM behaviors WHERE tenant_id = ? AND latch_breached = 1 ORDER BY seq", (tenant_id,))


async def add_verdicts(db: Any, rows: list[tuple[Any, ...]]) -> None:
    """rows: (id, behavior_id, tenant_id, detected, judge_error, trace_id, span_id, label, created_at)."""
    await db.executemany("INSERT INTO behavior_verdicts (id, behavior_id, tenant_id, detected, judge_error, trace_id, span_id,"
                         " label, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


async def recent_detections(db: Any, behavior_id: str, window: int) -> list[int]:
    """`detected` of the last `window` counted verdicts (judge errors excluded), newest first."""
    rows = await db.fetchall("SELECT detected FROM behavior_verdicts WHERE behavior_id = ? AND detected IS NOT NULL"
                             " ORDER BY seq DESC LIMIT ?", (behavior_id, window))
    return [r["detected"] for r in rows]


async def set_latch(db: Any, behavior_id: str, breached: bool, flips: int, at: str) -> None:
    await db.execute("UPDATE behaviors SET latch_breached = ?, latch_flips = ?, latch_changed_at = ? WHERE id = ?",
                     (int(breached), flips, at, behavior_id))


async def table_exists(db: Any, name: str) -> bool:
    return await db.fetchone("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)) is not None


async def owned_row(db: Any, table: str, row_id: str, tenant_id: str) -> bool:
    """A judge (`judges`) or score rule (`score_rules`) of the tenant exists."""
    assert table in ("judges", "score_rules")
    return await db.fetchone(f"SELECT 1 FROM {table} WHERE id = ? AND tenant_id = ?", (row_id, tenant_id)) is not None


async def fed_by_rule(db: Any, tenant_id: str, rule_id: str, judge_id: str | None) -> list[Any]:
    """The tenant's behaviors whose verdicts come from this score rule or from the judge it uses."""
    return await db.fetchall("SELECT * FROM behaviors WHERE tenant_id = ? AND (rule_id = ? OR (judge_id IS NOT NULL AND judge_id = ?))"
                             " ORDER BY seq", (tenant_id, rule_id, judge_id))


async def counted_spans(db: Any, behavior_id: str, span_ids: list[str]) -> set[tuple[str, str]]:
    """(trace_id, span_id) among `span_ids` that already have a counted verdict (judge errors excluded)."""
    found: set[tuple[str, str]] = set()
    for start in range(0, len(span_ids), 500):
        chunk = span_ids[start:start + 500]
        rows = await db.fetchall(f"SELECT trace_id, span_id FROM behavior_verdicts WHERE behavior_id = ? AND detected IS NOT NULL"
                                 f" AND span_id IN ({','.join('?' * len(chunk))})", (behavior_id, *chunk))
        found.update((r["trace_id"], r["span_id"]) for r in rows)
    return found


async def set_latch_side(db: Any, behavior_id: str, side: str) -> None:
    """The healthy side of a `baseline_direction: either` latch, fixed once (daemon/alerts/latch.py)."""
    await db.execute("UPDATE behaviors SET latch_side = ? WHERE id = ?", (side, behavior_id))
