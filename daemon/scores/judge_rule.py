"""llm_judge rules: each span's input and output judged by daemon.judges.evaluate (its cache, retries
and failure codes), a bounded number of calls at a time. A failed call is a row with score null and
its judge_error, never a score."""
from __future__ import annotations

import asyncio
from typing import Any

from daemon.judges import JudgeDefinition, evaluate
from daemon.store import judges as judge_store

JUDGE_CONCURRENCY = 8  # judge calls in flight per scoring job


async def definition_for(store: Any, tenant_id: str, rule: Any) -> JudgeDefinition | str:
    """The rule's judge: its stored judge (the rule's model and threshold override it) or its inline
    rubric; a message when the stored judge is gone."""
    if rule["judge_id"]:
        judge = await judge_store.get(store, rule["judge_id"])
        if judge is None or judge["tenant_id"] != tenant_id:
            return f"judge '{rule['judge_id']}' no longer exists"
        return JudgeDefinition(rubric=judge["rubric"], model=rule["model"] or judge["model"],
                               threshold=judge["threshold"] if rule["threshold"] is None else rule["threshold"],
                               kind=judge["kind"], choices=judge["choices"])
    return JudgeDefinition(rubric=rule["rubric"], model=rule["model"], threshold=0.5 if rule["threshold"] is None else rule["threshold"])


async def score_llm(store: Any, tenant_id: str, rule: Any, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    definition = await definition_for(store, tenant_id, rule)
    if isinstance(definition, str):
        return [{"score": None, "passed": None, "reason": None, "judge_error": {"code": "rule_error", "message": definition}}
                for _ in spans]
    gate = asyncio.Semaphore(JUDGE_CONCURRENCY)

    async def one(span: dict[str, Any]) -> dict[str, Any]:
        async with gate:
            verdict = await evaluate(store, definition, input=span.get("input") or "", output=span.get("output") or "",
                                     tenant_id=tenant_id)
        if verdict.judge_error is not None:
            return {"score": None, "passed": None, "reason": verdict.reason or None, "judge_error": verdict.judge_error}
        return {"score": verdict.score, "passed": verdict.passed, "reason": verdict.reason, "judge_error": None, "label": verdict.label}

    return list(await asyncio.gather(*(one(span) for span in spans)))
