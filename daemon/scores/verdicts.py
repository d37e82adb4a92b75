"""Behaviors fed by scoring: a behavior bound to a score rule (`rule_id`), or to the judge an
llm_judge rule uses (`judge_id`), gets one verdict per span that rule scores: `detected` is the
row's `passed`, `label` the classifier judge's choice. A judge or rule error is stored as a verdict
with `judge_error` and no `detected`, so it never counts in the rate.

The verdicts are written in the same transaction as the score rows (a resumed job neither loses nor
repeats them); a span that already has a counted verdict for the behavior (an earlier scoring job)
is not counted again. The latch is moved after the commit by daemon.alerts.latch, over the stored
verdicts, so a job resumed after a crash there moves it on its next batch or at its start."""
from __future__ import annotations

import logging
from typing import Any

from daemon.alerts import latch
from daemon.store import behaviors as behavior_store
from daemon.store.db import loads
from daemon.util import new_id, now_iso

MAX_ERROR_CHARS = 500
log = logging.getLogger("svcd.scores")


async def bound(db: Any, tenant_id: str, rule: Any) -> list[Any]:
    """The behaviors this rule's rows feed (a judge binds only through an llm_judge rule using it)."""
    judge_id = rule["judge_id"] if rule["type"] == "llm_judge" else None
    return await behavior_store.fed_by_rule(db, tenant_id, rule["id"], judge_id)


def _judge_error(error: dict[str, Any]) -> str:
    return f"{error.get('code')}: {error.get('message') or ''}"[:MAX_ERROR_CHARS]


async def add(tx: Any, behaviors: list[Any], rows: list[dict[str, Any]], labels: list[str | None]) -> None:
    """Verdicts for score `rows` (with the classifier label of each), inside the job's transaction."""
    at = now_iso()
    for behavior in behaviors:
        counted = await behavior_store.counted_spans(tx, behavior["id"], [r["span_id"] for r in rows])
        allowed = loads(behavior["labels"], None)
        verdicts = []
        for row, label in zip(rows, labels):
            if row["judge_error"] is not None:
                verdicts.append((new_id("vrd_"), behavior["id"], behavior["tenant_id"], None, _judge_error(row["judge_error"]),
                                 row["trace_id"], row["span_id"], None, at))
            elif (row["trace_id"], row["span_id"]) not in counted:
                kept = label if allowed is None or label in allowed else None
                verdicts.append((new_id("vrd_"), behavior["id"], behavior["tenant_id"], int(bool(row["passed"])), None,
                                 row["trace_id"], row["span_id"], kept, at))
        if verdicts:
            await behavior_store.add_verdicts(tx, verdicts)


async def move_latches(store: Any, behaviors: list[Any]) -> None:
    """Re-evaluate each behavior's latch over its stored verdicts (queues a notice on a crossing)."""
    for behavior in behaviors:
        if await behavior_store.get(store, behavior["id"]) is None:
            continue  # deleted meanwhile
        try:
            await latch.record(store, behavior["id"], [])
        except Exception:  # the scores are stored; a latch that cannot move now moves on the next verdict
            log.exception("moving the latch of behavior %s failed", behavior["id"])
