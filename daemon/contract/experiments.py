"""Experiments: the experiment record and the list/scenario/history/export queries. The other
request and result models (ExperimentCreate, RunResults, ScenarioResult, ComparisonResult ...) are
still in daemon/experiments/models.py; their open result models keep every key (extra allowed)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from daemon.contract.common import PageQuery, Query, Response

EXPERIMENT_STATUSES = ("created", "running", "completed", "failed", "cancelled")
ExperimentStatus = Literal["created", "running", "completed", "failed", "cancelled"]
ScenarioStatusFilter = Literal["passed", "pass", "failed", "fail", "error", "errored", "flaky", "not_passed", "created",
                               "queued", "running", "cancelled"]


class ExperimentRecord(Response):
    id: str
    name: str
    spec_id: str
    spec_version: int
    status: ExperimentStatus
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    total_runs: int
    completed_runs: int | None = None
    replicas: int | None = None
    concurrency: int | None = None
    matrix: list[dict[str, Any]] = Field(default_factory=list)
    seed: str | None = None
    filter_failing_from: str | None = None
    secret_names: list[str] = Field(default_factory=list, description="names only: values are never stored")
    error: str | None = None
    summary: dict[str, Any] | None = Field(default=None, description="MetricsSummary once finished")


class ExperimentListQuery(PageQuery):
    spec_id: str | None = Field(default=None, description="only this spec")
    status: ExperimentStatus | None = None


class ScenarioListQuery(PageQuery):
    experiment_id: str = Field(min_length=1, description="required")
    status: ScenarioStatusFilter | None = None
    scenario_id: str | None = Field(default=None, description="one scenario")


class HistoryQuery(PageQuery):
    status: str | None = Field(default=None, description="only experiments in this status")


class ExportQuery(Query):
    format: Literal["json", "ndjson"] | None = Field(default=None, description="json (default) or ndjson")


class ExperimentEvent(Response):
    """One experiment stream event (SSE `data:`): run, scenario and status events, then done."""
    model_config = {"extra": "allow"}
    type: str
