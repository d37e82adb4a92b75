"""Judges (definitions and their last calibration) and the judge cache: all their SQL."""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store, dumps, loads
from daemon.util import now_iso

_COLUMNS = "seq, id, tenant_id, name, rubric, model, threshold, kind, choices, calibration, created_at"


def _row(row: Any) -> dict[str, Any]:
    item = dict(row)
    item["choices"] = loads(item["choices"])
    item["calibration"] = loads(item["calibration"])
    return item


async def create(store: Store, tenant_id: str, judge_id: str, *, name: str, rubric: str, model: str | None,
                 threshold: float, kind: str, choices: dict[str, float] | None) -> dict[str, Any]:
    await store.execute(
        "INSERT INTO judges (id, tenant_id, name, rubric, model, threshold, kind, choices, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (judge_id, tenant_id, name, rubric, model, threshold, kind, dumps(choices) if choices is not None else None, now_iso()),
    )
    return await get(store, judge_id)  # type: ignore[return-value]


async def get(store: Store, judge_id: str) -> dict[str, Any] | None:
    """One judge of any tenant (the caller checks the owner), or None."""
    row = await store.fetchone(f"SELECT {_COLUMNS} FROM judges WHERE id = ?", (judge_id,))
    return _row(row) if row is not None else None


async def count(store: Store, tenant_id: str) -> int:
    row = await store.fetchone("SELECT COUNT(*) AS n FROM judges WHERE tenant_id = ?", (tenant_id,))
    return int(row["n"]) if row else 0


async def page(store: Store, tenant_id: str, limit: int, before_seq: int | None) -> list[dict[str, Any]]:
    """Up to `limit` judges of the tenant, newest first, with seq below `before_seq`."""
    sql = f"SELECT {_COLUMNS} FROM judges WHERE tenant_id = ?"
    params: list[Any] = [tenant_id]
    if before_seq is not None:
        sql += " AND seq < ?"
        params.append(before_seq)
    rows = await store.fetchall(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit])
    return [_row(r) for r in rows]


async def delete(store: Store, judge_id: str) -> bool:
    return bool(await store.execute("DELETE FROM judges WHERE id = ?", (judge_id,)))


async def set_calibration(store: Store, judge_id: str, calibration: dict[str, Any]) -> None:
    await store.execute("UPDATE judges SET calibration = ? WHERE id = ?", (dumps(calibration), judge_id))


async def cached(store: Store, tenant_id: str, key: str) -> dict[str, Any] | None:
    """A cached verdict {score, label, reason}, or None."""
    row = await store.fetchone("SELECT score, label, reason FROM judge_cache WHERE tenant_id = ? AND key = ?", (tenant_id, key))
    return dict(row) if row is not None else None


async def remember(store: Store, tenant_id: str, key: str, *, score: float, label: str | None, reason: str) -> None:
    await store.execute(
        "INSERT OR REPLACE INTO judge_cache (tenant_id, key, score, label, reason, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (tenant_id, key, score, label, reason, now_iso()),
    )


async def prune_cache(store: Store, keep_per_tenant: int) -> int:
    """Drop all but the newest `keep_per_tenant` cached verdicts of each tenant; returns how many went."""
    return await store.execute(
        "DELETE FROM judge_cache WHERE rowid IN (SELECT rowid FROM (SELECT rowid, ROW_NUMBER() OVER"
        " (PARTITION BY tenant_id ORDER BY created_at DESC) AS newest FROM judge_cache) WHERE newest > ?)",
        (keep_per_tenant,),
    )
