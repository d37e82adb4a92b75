"""The behavior latch (SPEC "Alert latch"): edge-triggered on the rolling detection rate.

Verdicts, the latch flip and the notification's outbox row are written in one transaction, so a
crossing is notified exactly once even across a restart, and never re-fired while breached.

`baseline_direction`: `above` breaches while the rate is above `baseline_pct`, `below` while it is
below. `either` breaches when the rate crosses `baseline_pct` in either direction: the side the rate
is first seen on with the minimum sample is the healthy side (kept as `latch_side`); being on the
other side breaches, coming back (or onto the baseline) recovers.

A behavior without its own `notify` is routed by the tenant's default route, when one is set.
"""
from __future__ import annotations

from typing import Any

from daemon.alerts.messages import body
from daemon.alerts.outbox import notification
from daemon.contract.behaviors import MIN_SAMPLE, WINDOW
from daemon.store import alerts as alert_store
from daemon.store import behaviors as behavior_store
from daemon.util import new_id, now_iso

OTHER_SIDE = {"above": "below", "below": "above"}


def rate_of(detections: list[int]) -> float | None:
    return sum(detections) / len(detections) if detections else None


def side_of(rate: float, baseline_pct: float) -> str | None:
    """'above', 'below', or None on the baseline itself."""
    return "above" if rate > baseline_pct else "below" if rate < baseline_pct else None


def breach_side(direction: str, healthy_side: str | None) -> str | None:
    """The side of the baseline that is a breach (for `either`, the side away from the healthy one)."""
    if direction == "either":
        return OTHER_SIDE.get(healthy_side or "")
    return direction


def crosses(rate: float | None, baseline_pct: float, direction: str, healthy_side: str | None = None) -> bool:
    if rate is None:
        return False
    bad_side = breach_side(direction, healthy_side)
    return bad_side is not None and side_of(rate, baseline_pct) == bad_side


def stats(row: Any, detections: list[int]) -> dict[str, Any]:
    rate = rate_of(detections)
    return {"rate": None if rate is None else round(rate, 6), "sample": len(detections), "breached": bool(row["latch_breached"]),
            "baseline_pct": row["baseline_pct"], "baseline_direction": row["baseline_direction"]}


def _reason(row: Any, rate: float, breached: bool) -> str:
    side = side_of(rate, row["baseline_pct"]) or "at"
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
        sampled = len(detections) >= MIN_SAMPLE
        healthy_side = row["latch_side"]
        if row["baseline_direction"] == "either" and healthy_side is None and sampled and rate is not None:
            healthy_side = side_of(rate, row["baseline_pct"])
            if healthy_side is not None:
                await behavior_store.set_latch_side(tx, behavior_id, healthy_side)
        breached = sampled and crosses(rate, row["baseline_pct"], row["baseline_direction"], healthy_side)
        if breached != bool(row["latch_breached"]):
            flips = row["latch_flips"] + 1
            await behavior_store.set_latch(tx, behavior_id, breached, flips, at)
            default_route = None if row["notify"] else await alert_store.get_default_route(tx, row["tenant_id"])
            if row["notify"] or default_route is not None:
                event = "behavior.breached" if breached else "behavior.recovered"
                payload = body(row["id"], row["name"], _reason(row, rate, breached), None, None, at, round(rate, 6), row["baseline_pct"])
                queued = await alert_store.enqueue(tx, notification(row, event, f"behavior:{behavior_id}:{flips}", payload,
                                                                    behavior_id=behavior_id, default_route=default_route))
        row = await behavior_store.get(tx, behavior_id)
    return stats(row, detections), queued
