"""The typed client: each method calls one /v1 route and returns the model the daemon validates
that answer against (daemon/contract).

    api = TypedApi(Client(config))
    results = await api.experiment(experiment_id)      # RunResults
    page = await api.list_experiments(status="running")  # Page[ExperimentRecord]

Errors are the plain client's: ApiError (non-2xx) and DaemonUnreachable.

The contract (daemon/contract: pure pydantic) is imported when a method first needs it, not when this
module is imported, so a client that never asks a typed question loads nothing of daemon/."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, TypeVar

from pydantic import BaseModel

from client.api import Client

if TYPE_CHECKING:
    from daemon.contract.experiments import ComparisonResult, RunResults
    from daemon.contract.common import Health, Page
    from daemon.contract.experiments import ExperimentMetrics, ExperimentRecord, HistoryItem
    from daemon.contract.runs import Run
    from daemon.contract.sandboxes import Sandbox, WorkspaceDiff
    from daemon.contract.specs import SpecRecord
    from daemon.contract.traces import Span, TraceDetail, TraceEvent
    from daemon.contract.behaviors import Behavior, BehaviorStats, VerdictsAccepted
    from daemon.contract.judges import Calibration, Judge, JudgeVerdict
    from daemon.contract.scores import ExperimentScores, Score, ScoreJob, ScoreJobAccepted, ScoreJobEvent, ScoreRule

M = TypeVar("M", bound=BaseModel)

__all__ = ["TypedApi"]


class TypedApi:
    def __init__(self, client: Client):
        self.client = client

    async def _get(self, model: type[M], path: str, **kw: Any) -> M:
        return model.model_validate(await self.client.get(path, **kw))

    async def _page(self, item: type[M], path: str, params: dict[str, Any] | None, limit: int | None,
                    cursor: str | None) -> Page[M]:
        from daemon.contract.common import Page

        answer = await self.client.get(path, params={**(params or {}), "limit": limit, "cursor": cursor})
        return Page[item].model_validate(answer)  # type: ignore[valid-type]

    async def _all(self, item: type[M], path: str, params: dict[str, Any] | None, cap: int) -> list[M]:
        """Follow next_cursor until `cap` items."""
        out: list[M] = []
        cursor = None
        while len(out) < cap:
            page = await self._page(item, path, params, min(100, cap - len(out)), cursor)
            out.extend(page.items)
            cursor = page.next_cursor
            if not cursor:
                break
        return out[:cap]

    # --- health ---------------------------------------------------------------------------------
    async def health(self, timeout: float | None = None) -> Health:
        from daemon.contract.common import Health

        return await self._get(Health, "/health", timeout=timeout)

    # --- experiments ----------------------------------------------------------------------------
    async def list_experiments(self, *, spec_id: str | None = None, status: str | None = None,
                               limit: int | None = None, cursor: str | None = None) -> Page[ExperimentRecord]:
        from daemon.contract.experiments import ExperimentRecord

        return await self._page(ExperimentRecord, "/v1/experiments", {"spec_id": spec_id, "status": status}, limit, cursor)

    async def experiments(self, cap: int = 500, **filters: Any) -> list[ExperimentRecord]:
        from daemon.contract.experiments import ExperimentRecord

        return await self._all(ExperimentRecord, "/v1/experiments", filters, cap)

    async def experiment(self, experiment_id: str) -> RunResults:
        from daemon.contract.experiments import RunResults

        return await self._get(RunResults, f"/v1/experiments/{experiment_id}")

    async def metrics(self, experiment_id: str) -> ExperimentMetrics:
        from daemon.contract.experiments import ExperimentMetrics

        return await self._get(ExperimentMetrics, f"/v1/metrics/experiments/{experiment_id}")

    async def history(self, spec_id: str, cap: int = 200) -> list[HistoryItem]:
        from daemon.contract.experiments import HistoryItem

        return await self._all(HistoryItem, f"/v1/evals/{spec_id}/history", None, cap)

    async def compare(self, baseline_id: str, candidate_id: str, thresholds: dict[str, float] | None = None) -> ComparisonResult:
        from daemon.contract.experiments import ComparisonResult

        body: dict[str, Any] = {"baseline_id": baseline_id, "candidate_id": candidate_id}
        if thresholds:
            body["thresholds"] = thresholds
        return ComparisonResult.model_validate(await self.client.post("/v1/experiments/compare", body))

    # --- runs -----------------------------------------------------------------------------------
    async def run(self, run_id: str) -> Run:
        from daemon.contract.runs import Run

        return await self._get(Run, f"/v1/runs/{run_id}")

    async def list_runs(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> Page[Run]:
        from daemon.contract.runs import Run

        return await self._page(Run, "/v1/runs", filters, limit, cursor)

    async def replay(self, run_id: str) -> Run:
        from daemon.contract.runs import Run

        return Run.model_validate(await self.client.post(f"/v1/runs/{run_id}/replay", {}))

    async def create_run(self, body: dict[str, Any]) -> Run:
        """POST /v1/runs (a RunCreate body): the queued Run."""
        from daemon.contract.runs import Run, RunCreate

        return Run.model_validate(await self.client.post("/v1/runs", RunCreate.model_validate(body).model_dump(exclude_none=True)))

    # --- sandboxes ------------------------------------------------------------------------------
    async def list_sandboxes(self, *, status: str | None = None, spec_id: str | None = None,
                             limit: int | None = None, cursor: str | None = None) -> Page[Sandbox]:
        from daemon.contract.sandboxes import Sandbox

        return await self._page(Sandbox, "/v1/sandboxes", {"status": status, "spec_id": spec_id}, limit, cursor)

    async def sandboxes(self, cap: int = 500, **filters: Any) -> list[Sandbox]:
        from daemon.contract.sandboxes import Sandbox

        return await self._all(Sandbox, "/v1/sandboxes", filters, cap)

    async def sandbox(self, sandbox_id: str) -> Sandbox:
        from daemon.contract.sandboxes import Sandbox

        return await self._get(Sandbox, f"/v1/sandboxes/{sandbox_id}")

    async def diff(self, sandbox_id: str) -> WorkspaceDiff:
        from daemon.contract.sandboxes import WorkspaceDiff

        return await self._get(WorkspaceDiff, f"/v1/sandboxes/{sandbox_id}/diff")

    # --- traces ---------------------------------------------------------------------------------
    async def list_traces(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> Page[TraceEvent]:
        """Stored trace events (GET /v1/traces; filters: run_id, sandbox_id, trace_id, since ...)."""
        from daemon.contract.traces import TraceEvent

        return await self._page(TraceEvent, "/v1/traces", filters, limit, cursor)

    async def trace_events(self, cap: int = 50000, **filters: Any) -> AsyncIterator[TraceEvent]:
        """Every matching event, oldest first, streamed as NDJSON."""
        from daemon.contract.traces import TraceEvent

        count = 0
        async for raw in self.client.ndjson("/v1/traces", {**filters, "format": "ndjson", "order": "asc"}):
            yield TraceEvent.model_validate(raw)
            count += 1
            if count >= cap:
                return

    async def trace(self, trace_id: str) -> TraceDetail:
        from daemon.contract.traces import TraceDetail

        return await self._get(TraceDetail, f"/v1/traces/{trace_id}")

    async def list_spans(self, *, limit: int | None = None, cursor: str | None = None, **filters: Any) -> Page[Span]:
        from daemon.contract.traces import Span

        return await self._page(Span, "/v1/spans", filters, limit, cursor)

    # --- specs ----------------------------------------------------------------------------------
    async def spec(self, spec_id: str, version: int | None = None) -> SpecRecord:
        from daemon.contract.specs import SpecRecord

        return await self._get(SpecRecord, f"/v1/specs/{spec_id}", params={"version": version})

    # --- judges (issue 13) ----------------------------------------------------------------------
    # Request bodies go as given: the daemon names a bad field in its 400.
    async def list_judges(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Judge]:
        from daemon.contract.judges import Judge

        return await self._page(Judge, "/v1/judges", None, limit, cursor)

    async def judge(self, judge_id: str) -> Judge:
        from daemon.contract.judges import Judge

        return await self._get(Judge, f"/v1/judges/{judge_id}")

    async def create_judge(self, body: dict[str, Any]) -> Judge:
        from daemon.contract.judges import Judge

        return Judge.model_validate(await self.client.post("/v1/judges", body))

    async def judge_eval(self, judge_id: str, body: dict[str, Any], *, cache: bool = True,
                         timeout: float | None = None) -> JudgeVerdict:
        """A failed judge call is a verdict with judge_error and score None (HTTP 200)."""
        from daemon.contract.judges import JudgeVerdict

        answer = await self.client.post(f"/v1/judges/{judge_id}/eval", body, params=None if cache else {"cache": "false"},
                                        timeout=timeout)
        return JudgeVerdict.model_validate(answer)

    async def calibrate_judge(self, judge_id: str, examples: list[Any], *, cache: bool = True,
                              timeout: float | None = None) -> Calibration:
        from daemon.contract.judges import Calibration

        answer = await self.client.post(f"/v1/judges/{judge_id}/calibrate", {"examples": examples},
                                        params=None if cache else {"cache": "false"}, timeout=timeout)
        return Calibration.model_validate(answer)

    async def delete_judge(self, judge_id: str) -> None:
        await self.client.delete(f"/v1/judges/{judge_id}")

    # --- score rules and scores -----------------------------------------------------------------
    async def list_score_rules(self, *, eval_id: str | None = None, limit: int | None = None,
                               cursor: str | None = None) -> Page[ScoreRule]:
        from daemon.contract.scores import ScoreRule

        return await self._page(ScoreRule, "/v1/score-rules", {"eval_id": eval_id}, limit, cursor)

    async def create_score_rule(self, body: dict[str, Any]) -> ScoreRule:
        from daemon.contract.scores import ScoreRule

        return ScoreRule.model_validate(await self.client.post("/v1/score-rules", body))

    async def delete_score_rule(self, rule_id: str) -> None:
        await self.client.delete(f"/v1/score-rules/{rule_id}")

    async def score_experiment(self, experiment_id: str, rule_ids: list[str] | None = None) -> ScoreJobAccepted:
        from daemon.contract.scores import ScoreJobAccepted

        body = {"rule_ids": rule_ids} if rule_ids else {}
        return ScoreJobAccepted.model_validate(await self.client.post(f"/v1/experiments/{experiment_id}/score", body))

    async def score_job(self, job_id: str) -> ScoreJob:
        from daemon.contract.scores import ScoreJob

        return await self._get(ScoreJob, f"/v1/score-jobs/{job_id}")

    async def score_job_events(self, job_id: str) -> AsyncIterator[ScoreJobEvent]:
        """The job's progress events until its `done` event."""
        from daemon.contract.scores import ScoreJobEvent

        async for event in self.client.sse(f"/v1/score-jobs/{job_id}/stream"):
            yield ScoreJobEvent.model_validate(event)

    async def experiment_scores(self, experiment_id: str, *, every: bool = False) -> ExperimentScores:
        from daemon.contract.scores import ExperimentScores

        return await self._get(ExperimentScores, f"/v1/experiments/{experiment_id}/scores",
                               params={"all": "true"} if every else None)

    async def list_scores(self, experiment_id: str, *, rule_id: str | None = None, every: bool = False,
                          limit: int | None = None, cursor: str | None = None) -> Page[Score]:
        from daemon.contract.scores import Score

        params = {"experiment_id": experiment_id, "rule_id": rule_id, "all": "true" if every else None}
        return await self._page(Score, "/v1/scores", params, limit, cursor)

    # --- behaviors ------------------------------------------------------------------------------
    async def list_behaviors(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Behavior]:
        from daemon.contract.behaviors import Behavior

        return await self._page(Behavior, "/v1/behaviors", None, limit, cursor)

    async def behavior(self, behavior_id: str) -> Behavior:
        from daemon.contract.behaviors import Behavior

        return await self._get(Behavior, f"/v1/behaviors/{behavior_id}")

    async def create_behavior(self, body: dict[str, Any]) -> Behavior:
        """The created behavior, with its webhook signing `secret` (shown only here)."""
        from daemon.contract.behaviors import Behavior

        return Behavior.model_validate(await self.client.post("/v1/behaviors", body))

    async def behavior_stats(self, behavior_id: str) -> BehaviorStats:
        from daemon.contract.behaviors import BehaviorStats

        return await self._get(BehaviorStats, f"/v1/behaviors/{behavior_id}/stats")

    async def add_verdicts(self, behavior_id: str, verdicts: list[dict[str, Any]]) -> VerdictsAccepted:
        from daemon.contract.behaviors import VerdictsAccepted

        answer = await self.client.post(f"/v1/behaviors/{behavior_id}/verdicts", {"verdicts": verdicts})
        return VerdictsAccepted.model_validate(answer)

    async def delete_behavior(self, behavior_id: str) -> None:
        await self.client.delete(f"/v1/behaviors/{behavior_id}")
