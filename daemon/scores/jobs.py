"""Offline scoring as a job kind on the engine: one engine job per scoring job.

A job scores every span of the experiment's traces that each of its rules applies to, a batch at a
time; each batch's rows are committed before the next starts, so a daemon stopped (or killed) mid-job
finds the job `running` at start-up, submits it again, and skips the (span, rule) pairs the job
already wrote (a unique index makes a second row for them impossible)."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from daemon.runner.engine import ENGINE_KEY, GroupKind, Job, engine_of
from daemon.scores import verdicts
from daemon.scores.scorers import Scorers
from daemon.store import scores as score_store
from daemon.store.db import Store
from daemon.util import new_id, now_iso
from daemon.appkeys import EVENTS, STORE

log = logging.getLogger("svcd.scores")

KIND = "scoring"
BATCH_SPANS = 500
MAX_SPANS_PER_JOB = 100_000
CONCURRENT_JOBS = 1  # scoring jobs at a time per tenant (they share the engine's slots with scenario runs)
TOPIC_RETENTION_S = 600.0
SPAN_FIELDS = ("span_id", "trace_id", "scenario_id", "run_id", "event_type", "tool", "status", "input", "output", "metadata")


def topic(job_id: str) -> str:
    return f"score-job:{job_id}"


def applies(applies_to: dict[str, Any], span: dict[str, Any]) -> bool:
    for key in ("event_type", "tool"):
        if applies_to.get(key) is not None and span.get(key) != applies_to[key]:
            return False
    return True


class ScoringKind(GroupKind):
    name = KIND

    def __init__(self, app: Any):
        self.app = app

    @property
    def store(self) -> Store:
        return self.app[STORE]

    async def run_job(self, job: Job, cancel: asyncio.Event) -> Any:
        row = await score_store.get_job(self.store, job.id)
        if row is None or row["status"] in ("completed", "failed"):
            return None
        try:
            finished = await self._score(row, cancel)
        except Exception as exc:
            log.exception("scoring job %s failed", job.id)
            await self._finish(job.id, "failed", f"{type(exc).__name__}: {exc}"[:500])
            return None
        if finished:
            await self._finish(job.id, "completed", None)
        return None

    async def recover(self) -> None:
        jobs = await score_store.unfinished_jobs(self.store)
        if jobs:
            engine_of(self.app).submit([Job(id=r["id"], group_id=r["id"], tenant=r["tenant_id"], kind=KIND) for r in jobs])
            log.info("scoring jobs resumed: %d", len(jobs))

    async def _score(self, row: Any, cancel: asyncio.Event) -> bool:
        """True when every span was scored; False when stopped (the job resumes at the next start)."""
        from daemon.store.db import loads

        store = self.store
        rules = [r for r in await score_store.rules_by_id(store, loads(row["rule_ids"], [])) if r["tenant_id"] == row["tenant_id"]]
        spans: list[dict[str, Any]] = []
        async for span in score_store.experiment_spans(store, row["tenant_id"], row["experiment_id"]):
            if len(spans) >= MAX_SPANS_PER_JOB:
                raise ValueError(f"the experiment has more than {MAX_SPANS_PER_JOB} spans (the limit per scoring job)")
            spans.append({k: span.get(k) for k in SPAN_FIELDS})
        work = []
        for rule in rules:
            applies_to = loads(rule["applies_to"], {})
            work.append((rule, [s for s in spans if applies(applies_to, s)]))
        done = await score_store.scored_pairs(store, row["id"])
        count, errors = await score_store.count_job_rows(store, row["id"])
        await score_store.start_job(store, row["id"], sum(len(matching) for _, matching in work), now_iso())
        job = await self._progress(row["id"], "progress")
        scorers = Scorers(self.app, row["tenant_id"], row["id"])
        try:
            for rule, matching in work:
                behaviors = await verdicts.bound(store, row["tenant_id"], rule)
                await verdicts.move_latches(store, behaviors)  # a resumed job: verdicts committed before a crash
                todo = [s for s in matching if (s["span_id"], rule["id"]) not in done]
                for start in range(0, len(todo), BATCH_SPANS):
                    if cancel.is_set():
                        return False
                    batch = todo[start:start + BATCH_SPANS]
                    results = await scorers.score(rule, batch)
                    at = now_iso()
                    rows = [_row(row, rule, span, result, at) for span, result in zip(batch, results)]
                    count += len(batch)
                    errors += sum(1 for result in results if result["judge_error"] is not None)
                    async with store.transaction() as tx:  # one commit per batch: rows, verdicts, progress
                        await score_store.append_scores(tx, rows)
                        await verdicts.add(tx, behaviors, rows, [result.get("label") for result in results])
                        await score_store.set_progress(tx, row["id"], count, errors)
                    await verdicts.move_latches(store, behaviors)
                    self.app[EVENTS].publish(topic(row["id"]), {"type": "progress", "job": {**job, "done": count, "errors": errors}})
        finally:
            await scorers.close()
        return True

    async def _finish(self, job_id: str, status: str, error: str | None) -> None:
        n, errors = await score_store.count_job_rows(self.store, job_id)
        await score_store.set_progress(self.store, job_id, n, errors)
        await score_store.finish_job(self.store, job_id, status, error, now_iso())
        await self._progress(job_id, "done")
        events = self.app[EVENTS]
        events.close(topic(job_id))
        asyncio.get_running_loop().call_later(TOPIC_RETENTION_S, events.forget, topic(job_id))

    async def _progress(self, job_id: str, kind: str) -> dict[str, Any]:
        body = score_store.job_body(await score_store.get_job(self.store, job_id))
        self.app[EVENTS].publish(topic(job_id), {"type": kind, "job": body})
        return body


def _row(job: Any, rule: Any, span: dict[str, Any], result: dict[str, Any], at: str) -> dict[str, Any]:
    return {"id": new_id("sc_"), "tenant_id": job["tenant_id"], "job_id": job["id"], "experiment_id": job["experiment_id"],
            "scenario_id": span.get("scenario_id"), "trace_id": span["trace_id"], "span_id": span["span_id"], "rule_id": rule["id"],
            "score": result["score"], "passed": result["passed"], "reason": result["reason"], "judge_error": result["judge_error"],
            "created_at": at}


async def submit(app: Any, tenant_id: str, experiment_id: str, rule_ids: list[str], trigger: str) -> str:
    """A new scoring job, queued on the engine; its id."""
    job_id = new_id("sj_")
    await score_store.insert_job(app[STORE], job_id, tenant_id, experiment_id, rule_ids, trigger, now_iso())
    engine_of(app).submit([Job(id=job_id, group_id=job_id, tenant=tenant_id, kind=KIND)])
    return job_id


async def score_on_completion(app: Any, experiment_id: str, status: str) -> None:
    """COMPLETED_HOOKS: rules scoped to the experiment's spec score it when it completes."""
    if status != "completed":
        return
    experiment = await score_store.experiment(app[STORE], experiment_id)
    if experiment is None:
        return
    rules = await score_store.rules_for_experiment(app[STORE], experiment["tenant_id"], experiment["spec_id"], only_eval=True)
    if rules:
        await submit(app, experiment["tenant_id"], experiment_id, [r["id"] for r in rules], "completion")


async def start(app: Any) -> ScoringKind:
    engine = engine_of(app)
    kind = ScoringKind(app)
    engine.register(kind)
    # per tenant: one tenant's slow scoring job never holds back another tenant's
    engine.scheduler.set_kind_tenant_cap(KIND, CONCURRENT_JOBS)
    engine.acquire("scores")
    await kind.recover()
    return kind


async def stop(app: Any) -> None:
    engine = app.get(ENGINE_KEY)
    if engine is not None:
        await engine.release("scores")
