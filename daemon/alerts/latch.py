"""The behavior latch (SPEC "Alert latch"): edge-triggered on the rolling detection rate.

Verdicts, the latch flip and the notification's outbox row are written in one transaction, so a
crossing is notified exactly once even across a restart, and never re-fired while breached.
"""
from __future__ import annotations

from typing import Any

from daemon.alerts.messages import body
from daemon.alerts.outbox import notification
from daemon.contract.behaviors import MIN_SAMPLE, WINDOW
from daemon.store import alerts as alert_store
from daemon.store import behaviors as behavior_store
from daemon.util import new_id, now_iso


def rate_of(detections: list[int]) -> float | None:
    return sum(detections) / len(detections) if detections else None


def crosses(rate: float | None, baseline_pct: float, direction: str) -> bool:
    if rate is None:
        return False
    return rate > baseline_pct if direction == "above" else rate < baseline_pct


def stats(row: Any, detections: list[int]) -> dict[str, Any]:
    rate = rate_of(detections)
    return {"rate": None if rate is None else round(rate, 6), "sample": len(detections), "breached": bool(row["latch_breached"]),
            "baseline_pct": row["baseline_pct"], "baseline_direction": row["baseline_direction"]}


def _reason(row: Any, rate: float, breached: bool) -> str:
    side = row["baseline_direction"] if breached else ("below" if row["baseline_direction"] == "above" else "above")
    prefix = "" if breached else "recovered: "
    return f"{prefix}detection rate {rate:g} {side} baseline {row['baseline_pct']:g} over the last {WINDOW} verdicts"


async def record(store: Any, behavior_id: str, verdicts: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """Store verdicts and move the latch; returns (stats, whether a notification was queued)."""
    at = now_iso()
    rows = [(new_id("vrd_"), behavior_id, v["tenant_id"], None if v["detected"] is None else int(v["detected"]), v["judge_error"],
             v["trace_id"], v["span_id"], v["label"], at) for v in verdicts]
    queued = False
    async with store.transaction() as tx:
        await behavior_store.add_verdicts(tx, rows)
        row = await behavior_store.get(tx, behavior_id)  # read under the write lock: the latch as it stands
        detections = await behavior_store.recent_detections(tx, behavior_id, WINDOW)
        rate = rate_of(detections)
        breached = len(detections) >= MIN_SAMPLE and crosses(rate, row["baseline_pct"], row["baseline_direction"])
        if breached != bool(row["latch_breached"]):
            flips = row["latch_flips"] + 1
            await behavior_store.set_latch(tx, behavior_id, breached, flips, at)
            if row["notify"]:
                event = "behavior.breached" if breached else "behavior.recovered"
                payload = body(row["id"], row["name"], _reason(row, rate, breached), None, None, at, round(rate, 6), row["baseline_pct"])
                queued = await alert_store.enqueue(tx, notification(row, event, f"behavior:{behavior_id}:{flips}", payload,
                                                                    behavior_id=behavior_id))
        row = await behavior_store.get(tx, behavior_id)
    return stats(row, detections), queued
