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
