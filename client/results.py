"""Open result models of experiments, as the client reads them: RunResults (GET
/v1/experiments/{id}), ScenarioResult, ReplicaRun and ComparisonResult (POST /v1/experiments/compare).

The daemon declares these in daemon/experiments/models.py, which clients may not import (import-linter:
the client never imports daemon internals); these mirror its field names. Unknown keys are kept.
Terminal state vocabularies the contract does not name as constants are defined here, once."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Statuses after which an experiment / a run changes no more: the final ones of the contract's
# ExperimentStatus (daemon.contract.experiments.EXPERIMENT_STATUSES) and of Run.status. Spelled out
# here so importing the client loads nothing of daemon/ (the TUI's boundary test checks that).
TERMINAL_EXPERIMENT_STATUSES = ("completed", "failed", "cancelled")
TERMINAL_RUN_STATUSES = ("passed", "failed", "errored", "cancelled")
# Run / replica verdicts (Run.verdict) and scenario verdicts (ScenarioResult.verdict).
RUN_VERDICTS = ("pass", "fail", "error")
SCENARIO_VERDICTS = ("pass", "fail", "flaky", "error")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Reproducer(_Open):
    command: str | None = None
    spec_id: str | None = None
    spec_version: int | None = None
    seed: str | None = None
    inputs: dict[str, Any] = {}
    matrix_entry: dict[str, Any] = {}


class ReplicaRun(_Open):
    index: int
    seed: str
    run_id: str
    status: str = Field(default="", description="pending|queued|running|passed|failed|errored|cancelled")
    verdict: Literal["pass", "fail", "error"] | None = None
    score: float | None = None
    invariant_results: list[dict[str, Any]] = []
    duration_ms: int | None = None
    wall_ms: int | None = None
    cost_usd: float | None = None
    error: str | None = None
    reason: str | None = None
    attempts: int = 0
    previous_run_ids: list[str] = []
    trace_ids: list[str] = []
    trajectory_url: str | None = None
    reproducer: Reproducer | None = None
    started_at: str | None = None
    finished_at: str | None = None


class ScenarioResult(_Open):
    id: str
    experiment_id: str
    index: int
    matrix_entry: dict[str, Any] = {}
    status: str = Field(default="", description="created|queued|running|pass|fail|flaky|error|cancelled")
    verdict: Literal["pass", "fail", "flaky", "error"] | None = None
    passed: bool | None = None
    replicas: int = 0
    completed_runs: int = 0
    passed_runs: int = 0
    failed_runs: int = 0
    errored_runs: int = 0
    pass_rate: float | None = None
    pass_rate_ci: list[float] | None = None
    score: float | None = None
    invariant_scores: dict[str, float] = {}
    invariants: list[dict[str, Any]] = []
    cost_usd: float | None = None
    mean_wall_ms: float | None = None
    seeds: list[str] = []
    run_ids: list[str] = []
    trace_ids: list[str] = []
    errors: list[str] = []
    reproducer: Reproducer | None = None
    runs: list[ReplicaRun] = []
    finished_at: str | None = None


class MetricsSummary(_Open):
    total_runs: int = 0
    passed_runs: int = 0
    failed_runs: int = 0
    errored_runs: int = 0
    pass_rate: float | None = None
    pass_rate_ci: list[float] | None = Field(default=None, description="95% Wilson interval")
    total_cost_usd: float = 0.0
    mean_cost_per_run_usd: float | None = None
    mean_wall_ms: float | None = None
    p95_wall_ms: float | None = None
    total_tool_calls: int = 0
    mean_tool_calls: float | None = None
    tool_success_rate: float | None = None
    side_effect_violations: int = 0


def as_summary(value: Any) -> MetricsSummary | None:
    """ExperimentRecord.summary / ExperimentMetrics.summary as a MetricsSummary, whether the contract
    declares it as a mapping or as its own model."""
    if value is None:
        return None
    return MetricsSummary.model_validate(value if isinstance(value, dict) else value.model_dump())


class ToolStats(_Open):
    count: int | None = None
    mean_ms: float | None = None
    error_rate: float | None = None


def tool_stats(breakdown: dict[str, Any]) -> dict[str, ToolStats]:
    """ExperimentMetrics.tool_breakdown (tool -> {count, mean_ms, error_rate}) as models."""
    return {name: ToolStats.model_validate(v if isinstance(v, dict) else v.model_dump()) for name, v in breakdown.items()}


class RunResultsMetrics(MetricsSummary):
    verdicts: dict[str, int] | None = Field(default=None, description="scenario verdict counts: pass, fail, flaky, error")


class RunResults(_Open):
    """GET /v1/experiments/{id}: the experiment record, its scenarios and metrics."""
    id: str
    experiment_id: str
    name: str
    spec_id: str
    spec_version: int
    status: Literal["created", "running", "completed", "failed", "cancelled"]
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    total_runs: int
    completed_runs: int | None = None
    summary: MetricsSummary | None = None
    scenarios: list[ScenarioResult]
    metrics: RunResultsMetrics
    aggregation: dict[str, Any] | None = None


class MetricComparison(_Open):
    name: str
    baseline: float | None
    candidate: float | None
    delta: float | None
    delta_pct: float | None = None
    direction: Literal["better", "same", "worse", "unknown"]
    threshold: float | None = None
    threshold_kind: Literal["absolute", "relative"] | None = None
    regressed: bool


class ComparisonResult(_Open):
    baseline_id: str
    candidate_id: str
    regressed: bool
    regressions: list[str]
    metrics: list[MetricComparison]
    thresholds: dict[str, float]
    changed_scenarios: list[dict[str, Any]]
