"""Experiments: the requests, the experiment record and the list/scenario/history/export queries.
The other result models (RunResults, ScenarioResult, ComparisonResult, ExperimentMetrics ...) are
still in daemon/experiments/models.py; they are open models that keep every key (extra allowed)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from daemon.contract.common import PageQuery, Query, Request, Response
from daemon.contract.specs import SPEC_ID_PATTERN

EXPERIMENT_STATUSES = ("created", "running", "completed", "failed", "cancelled")
ExperimentStatus = Literal["created", "running", "completed", "failed", "cancelled"]
ScenarioStatusFilter = Literal["passed", "pass", "failed", "fail", "error", "errored", "flaky", "not_passed", "created",
                               "queued", "running", "cancelled"]


class ExperimentCreate(Request):
    """Create an experiment: every matrix entry x `replicas` runs of one spec version.

    `replicas` and `matrix` override the spec's `parallelism`; `concurrency` caps this experiment's
    parallel runs (the global limit and the spec's `resources.concurrency_limit` still apply).
    `seed` is the base seed: replica seeds are derived from it and the replica's position
    (default: the experiment id), so the same `seed` reproduces every replica.
    `filter_failing_from` re-runs only the scenarios (matrix entries) that failed, were flaky or
    errored in that earlier experiment of the same spec. Secrets are held in memory only."""

    name: str | None = Field(default=None, min_length=1, max_length=200, description="default: the spec id")
    spec_id: str = Field(min_length=1, pattern=SPEC_ID_PATTERN)
    spec_version: int | None = Field(default=None, ge=1, description="default: latest")
    secrets: dict[str, str] | None = None
    replicas: int | None = Field(default=None, ge=1, le=1000)
    concurrency: int | None = Field(default=None, ge=1, le=1000)
    matrix: list[dict[str, Any]] | None = None
    inputs: dict[str, Any] | None = None
    seed: str | None = Field(default=None, min_length=1, max_length=128)
    filter_failing_from: str | None = None


class ExperimentRun(Request):
    """Optional body of `POST /v1/experiments/{id}/run`: secrets to (re-)send."""

    secrets: dict[str, str] | None = None


class Thresholds(Request):
    """Regression thresholds. Rates in absolute points (0.02 = 2 percentage points), amounts
    relative to the baseline (0.20 = +20%). Sign optional: it follows the metric's direction."""

    pass_rate: float | None = Field(default=None, description="default -0.02 (absolute)")
    p95_wall_ms: float | None = Field(default=None, description="default +0.20 (relative)")
    mean_cost_per_run_usd: float | None = Field(default=None, description="default +0.20 (relative)")
    tool_success_rate: float | None = Field(default=None, description="default -0.05 (absolute)")


class CompareRequest(Request):
    """Compare a candidate experiment with a baseline. Defaults (SPEC): pass_rate -2 points
    (absolute), p95_wall_ms +20% (relative), mean_cost_per_run_usd +20% (relative),
    tool_success_rate -5 points (absolute). Crossing a threshold strictly is a regression; the
    response echoes the thresholds used."""

    baseline_id: str = Field(min_length=1)
    candidate_id: str = Field(min_length=1)
    thresholds: Thresholds | None = None


# --- responses -------------------------------------------------------------------------------------


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


class ExperimentRunAccepted(Response):
    id: str
    status: Literal["running"]
    total_runs: int


class ExperimentMetrics(Response):
    """Run-level metrics of an experiment: summary (MetricsSummary), per-tool breakdown, trends."""
    experiment_id: str
    summary: dict[str, Any]
    tool_breakdown: dict[str, dict[str, Any]] = Field(description="tool -> {count, mean_ms, error_rate}")
    cost_trend: list[dict[str, Any]] = Field(description="[{run_id, cost_usd, ts, scenario_id, replica_index}] in completion order")
    pass_rate_trend: list[dict[str, Any]] = Field(description="[{run_id, pass_rate (cumulative), ts, status, ...}]")


class HistoryItem(Response):
    experiment_id: str
    name: str
    status: str
    created_at: str
    finished_at: str | None
    spec_version: int
    total_runs: int | None
    pass_rate: float | None
    total_cost_usd: float | None
    p95_wall_ms: float | None
