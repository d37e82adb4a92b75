"""The typed client: each method calls one route of the route table (daemon/contract/routes.py) and
returns the model the daemon validates that answer against (the route's answer_model).

    api = TypedApi(Client(config))
    results = await api.experiment(experiment_id)      # RunResults
    page = await api.list_experiments(status="running")  # Page[ExperimentRecord]

Errors are the plain client's: ApiError (non-2xx) and DaemonUnreachable.

The route table and the contract (daemon/contract: pure pydantic) are imported when a method first needs
them, not when this module is imported, so a client that never asks a typed question loads nothing of daemon/."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, TypeVar

from pydantic import BaseModel

from client.api import Client
from client.routes import R

if TYPE_CHECKING:
    from daemon.contract.experiments import ComparisonResult, RunResults
    from daemon.contract.common import Health, Page
    from daemon.contract.effects import EffectsDiff, RunEffects
    from daemon.contract.experiments import ExperimentMetrics, ExperimentRecord, HistoryItem
    from daemon.contract.runs import Run
    from daemon.contract.sandboxes import Sandbox, WorkspaceDiff
    from daemon.contract.specs import SpecRecord
    from daemon.contract.traces import Span, TraceDetail, TraceEvent
    from daemon.contract.behaviors import Behavior, BehaviorStats, VerdictsAccepted
    from daemon.contract.routes import Route
    from daemon.contract.judges import Calibration, Judge, JudgeVerdict
    from daemon.contract.scores import ExperimentScores, Score, ScoreJob, ScoreJobAccepted, ScoreJobEvent, ScoreRule

M = TypeVar("M", bound=BaseModel)

__all__ = ["TypedApi"]


class TypedApi:
    def __init__(self, client: Client):
        self.client = client

    async def _call(self, route: Route, **kw: Any) -> Any:
        """The route's answer as its declared model (route.answer_model)."""
        return route.answer_model.model_validate(await self.client.call(route, **kw))

    async def _page(self, route: Route, params: dict[str, Any] | None, limit: int | None,
                    cursor: str | None, **path: Any) -> Any:
        return await self._call(route, query={**(params or {}), "limit": limit, "cursor": cursor}, **path)

    async def _all(self, route: Route, params: dict[str, Any] | None, cap: int, **path: Any) -> list[Any]:
        """Follow next_cursor until `cap` items."""
        out: list[Any] = []
        cursor = None
        while len(out) < cap:
            page = await self._page(route, params, min(100, cap - len(out)), cursor, **path)
            out.extend(page.items)
            cursor = page.next_cursor
            if not cursor:
                break
        return out[:cap]

    # --- health ---------------------------------------------------------------------------------
    async def health(self, timeout: float | None = None) -> Health:
        return await self._call(R.HEALTH, timeout=timeout)

    # --- experiments ----------------------------------------------------------------------------
    async def list_experiments(self, *, spec_id: str | None = None, status: str | None = None,
                               limit: int | None = None, cursor: str | None = None) -> Page[ExperimentRecord]:
        return await self._page(R.LIST_EXPERIMENTS, {"spec_id": spec_id, "status": status}, limit, cursor)

    async def experiments(self, cap: int = 500, **filters: Any) -> list[ExperimentRecord]:
        return await self._all(R.LIST_EXPERIMENTS, filters, cap)

    async def experiment(self, experiment_id: str) -> RunResults:
        return await self._call(R.GET_EXPERIMENT, experiment_id=experiment_id)

    async def metrics(self, experiment_id: str) -> ExperimentMetrics:
        return await self._call(R.GET_EXPERIMENT_METRICS, experiment_id=experiment_id)

    async def history(self, spec_id: str, cap: int = 200) -> list[HistoryItem]:
        return await self._all(R.EVAL_HISTORY, None, cap, spec_id=spec_id)

    async def compare(self, baseline_id: str, candidate_id: str, thresholds: dict[str, float] | None = None) -> ComparisonResult:
        body: dict[str, Any] = {"baseline_id": baseline_id, "candidate_id": candidate_id}
        if thresholds:
            body["thresholds"] = thresholds
        return await self._call(R.COMPARE_EXPERIMENTS, body=body)

    # --- runs -----------------------------------------------------------------------------------
    async def run(self, run_id: str) -> Run:
        return await self._call(R.GET_RUN, run_id=run_id)

    async def list_runs(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> Page[Run]:
        return await self._page(R.LIST_RUNS, filters, limit, cursor)

    async def run_effects(self, run_id: str) -> RunEffects:
        """The run's effect ledger (409 until it has finished)."""
        return await self._call(R.GET_RUN_EFFECTS, run_id=run_id)

    async def diff_run_effects(self, run_id: str, other: str) -> EffectsDiff:
        """What differs between this run's effects (A) and run `other`'s (B)."""
        return await self._call(R.DIFF_RUN_EFFECTS, query={"other": other}, run_id=run_id)

    async def replay(self, run_id: str) -> Run:
        return await self._call(R.REPLAY_RUN, body={}, run_id=run_id)

    async def create_run(self, body: dict[str, Any]) -> Run:
        """POST /v1/runs (a RunCreate body): the queued Run."""
        route = R.CREATE_RUN
        return await self._call(route, body=route.body_model.model_validate(body).model_dump(exclude_none=True))

    # --- sandboxes ------------------------------------------------------------------------------
    async def list_sandboxes(self, *, status: str | None = None, spec_id: str | None = None,
                             limit: int | None = None, cursor: str | None = None) -> Page[Sandbox]:
        return await self._page(R.LIST_SANDBOXES, {"status": status, "spec_id": spec_id}, limit, cursor)

    async def sandboxes(self, cap: int = 500, **filters: Any) -> list[Sandbox]:
        return await self._all(R.LIST_SANDBOXES, filters, cap)

    async def sandbox(self, sandbox_id: str) -> Sandbox:
        return await self._call(R.GET_SANDBOX, sandbox_id=sandbox_id)

    async def diff(self, sandbox_id: str) -> WorkspaceDiff:
        return await self._call(R.SANDBOX_DIFF, sandbox_id=sandbox_id)

    # --- traces ---------------------------------------------------------------------------------
    async def list_traces(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> Page[TraceEvent]:
        """Stored trace events (GET /v1/traces; filters: run_id, sandbox_id, trace_id, since ...)."""
        return await self._page(R.LIST_TRACES, filters, limit, cursor)

    async def trace_events(self, cap: int = 50000, **filters: Any) -> AsyncIterator[TraceEvent]:
        """Every matching event, oldest first, streamed as NDJSON."""
        route = R.LIST_TRACES
        count = 0
        async for raw in self.client.stream(route, query={**filters, "format": "ndjson", "order": "asc"}):
            yield route.event_model.model_validate(raw)
            count += 1
            if count >= cap:
                return

    async def trace(self, trace_id: str) -> TraceDetail:
        return await self._call(R.GET_TRACE, trace_id=trace_id)

    async def list_spans(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> Page[Span]:
        return await self._page(R.LIST_SPANS, filters, limit, cursor)

    # --- specs ----------------------------------------------------------------------------------
    async def spec(self, spec_id: str, version: int | None = None) -> SpecRecord:
        return await self._call(R.GET_SPEC, query={"version": version}, spec_id=spec_id)

    # --- judges ------------------------------------------------------------------------------
    # Request bodies go as given: the daemon names a bad field in its 400.
    async def list_judges(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Judge]:
        return await self._page(R.LIST_JUDGES, None, limit, cursor)

    async def judge(self, judge_id: str) -> Judge:
        return await self._call(R.GET_JUDGE, judge_id=judge_id)

    async def create_judge(self, body: dict[str, Any]) -> Judge:
        return await self._call(R.CREATE_JUDGE, body=body)

    async def judge_eval(self, judge_id: str, body: dict[str, Any], *, cache: bool = True,
                         timeout: float | None = None) -> JudgeVerdict:
        """A failed judge call is a verdict with judge_error and score None (HTTP 200)."""
        return await self._call(R.EVAL_JUDGE, body=body, query=None if cache else {"cache": "false"}, timeout=timeout,
                                judge_id=judge_id)

    async def calibrate_judge(self, judge_id: str, examples: list[Any], *, cache: bool = True,
                              timeout: float | None = None) -> Calibration:
        return await self._call(R.CALIBRATE_JUDGE, body={"examples": examples}, query=None if cache else {"cache": "false"},
                                timeout=timeout, judge_id=judge_id)

    async def delete_judge(self, judge_id: str) -> None:
        await self.client.call(R.DELETE_JUDGE, judge_id=judge_id)

    # --- score rules and scores -----------------------------------------------------------------
    async def list_score_rules(self, *, eval_id: str | None = None, limit: int | None = None,
                               cursor: str | None = None) -> Page[ScoreRule]:
        return await self._page(R.LIST_SCORE_RULES, {"eval_id": eval_id}, limit, cursor)

    async def create_score_rule(self, body: dict[str, Any]) -> ScoreRule:
        return await self._call(R.CREATE_SCORE_RULE, body=body)

    async def delete_score_rule(self, rule_id: str) -> None:
        await self.client.call(R.DELETE_SCORE_RULE, rule_id=rule_id)

    async def score_experiment(self, experiment_id: str, rule_ids: list[str] | None = None) -> ScoreJobAccepted:
        body = {"rule_ids": rule_ids} if rule_ids else {}
        return await self._call(R.SCORE_EXPERIMENT, body=body, experiment_id=experiment_id)

    async def score_job(self, job_id: str) -> ScoreJob:
        return await self._call(R.GET_SCORE_JOB, job_id=job_id)

    async def score_job_events(self, job_id: str) -> AsyncIterator[ScoreJobEvent]:
        """The job's progress events until its `done` event."""
        route = R.STREAM_SCORE_JOB
        async for event in self.client.stream(route, job_id=job_id):
            yield route.event_model.model_validate(event)

    async def experiment_scores(self, experiment_id: str, *, every: bool = False) -> ExperimentScores:
        return await self._call(R.EXPERIMENT_SCORES, query={"all": "true"} if every else None, experiment_id=experiment_id)

    async def list_scores(self, experiment_id: str, *, rule_id: str | None = None, every: bool = False,
                          limit: int | None = None, cursor: str | None = None) -> Page[Score]:
        params = {"experiment_id": experiment_id, "rule_id": rule_id, "all": "true" if every else None}
        return await self._page(R.LIST_SCORES, params, limit, cursor)

    # --- behaviors ------------------------------------------------------------------------------
    async def list_behaviors(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Behavior]:
        return await self._page(R.LIST_BEHAVIORS, None, limit, cursor)

    async def behavior(self, behavior_id: str) -> Behavior:
        return await self._call(R.GET_BEHAVIOR, behavior_id=behavior_id)

    async def create_behavior(self, body: dict[str, Any]) -> Behavior:
        """The created behavior, with its webhook signing `secret` (shown only here)."""
        return await self._call(R.CREATE_BEHAVIOR, body=body)

    async def behavior_stats(self, behavior_id: str) -> BehaviorStats:
        return await self._call(R.BEHAVIOR_STATS, behavior_id=behavior_id)

    async def add_verdicts(self, behavior_id: str, verdicts: list[dict[str, Any]]) -> VerdictsAccepted:
        return await self._call(R.POST_VERDICTS, body={"verdicts": verdicts}, behavior_id=behavior_id)

    async def delete_behavior(self, behavior_id: str) -> None:
        await self.client.call(R.DELETE_BEHAVIOR, behavior_id=behavior_id)
