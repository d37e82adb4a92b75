"""Request and response models of the replica, experiment, scenario and metrics endpoints. The
request models validate bodies; the response models document the shapes in the OpenAPI document
(responses are built as plain dicts with exactly these fields)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SecretMap = dict[str, str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- requests --------------------------------------------------------------------------------------


class ReplicaSuiteCreate(_Strict):
    """Run one spec `n_replicas` times, one seed per replica. Secrets are held in memory only."""

    spec_id: str = Field(min_length=1)
    n_replicas: int = Field(ge=2, le=1000, description="2..1000")
    inputs: dict[str, Any] | None = None
    spec_version: int | None = Field(default=None, ge=1, description="default: latest")
    secrets: SecretMap | None = Field(default=None, description="name -> value; held in memory only, never stored or echoed")


class ExperimentCreate(_Strict):
    """Create an experiment: every matrix entry x `replicas` runs of one spec version.

    `replicas` and `matrix` override the spec's `parallelism`; `concurrency` caps this experiment's
    parallel runs (the global limit and the spec's `resources.concurrency_limit` still apply).
    `seed` is the base seed: replica seeds are derived from it and the replica's position
    (default: the experiment id), so the same `seed` reproduces every replica.
    `filter_failing_from` re-runs only the scenarios (matrix entries) that failed, were flaky or
    errored in that earlier experiment of the same spec. Secrets are held in memory only."""

    name: str | None = Field(default=None, min_length=1, max_length=200, description="default: the spec id")
    spec_id: str = Field(min_length=1)
    spec_version: int | None = Field(default=None, ge=1, description="default: latest")
    secrets: SecretMap | None = None
    replicas: int | None = Field(default=None, ge=1, le=1000)
    concurrency: int | None = Field(default=None, ge=1, le=1000)
    matrix: list[dict[str, Any]] | None = None
    inputs: dict[str, Any] | None = None
    seed: str | None = Field(default=None, min_length=1, max_length=128)
    filter_failing_from: str | None = None


class ExperimentRun(_Strict):
    """Optional body of `POST /v1/experiments/{id}/run`: secrets to (re-)send."""

    secrets: SecretMap | None = None


class Thresholds(_Strict):
    """Regression thresholds. Rates in absolute points (0.02 = 2 percentage points), amounts
    relative to the baseline (0.20 = +20%). Sign optional: it follows the metric's direction."""

    pass_rate: float | None = Field(default=None, description="default -0.02 (absolute)")
    p95_wall_ms: float | None = Field(default=None, description="default +0.20 (relative)")
    mean_cost_per_run_usd: float | None = Field(default=None, description="default +0.20 (relative)")
    tool_success_rate: float | None = Field(default=None, description="default -0.05 (absolute)")


class CompareRequest(_Strict):
    """Compare a candidate experiment with a baseline. Defaults (SPEC): pass_rate -2 points
    (absolute), p95_wall_ms +20% (relative), mean_cost_per_run_usd +20% (relative),
    tool_success_rate -5 points (absolute). Crossing a threshold strictly is a regression; the
    response echoes the thresholds used."""

    baseline_id: str = Field(min_length=1)
    candidate_id: str = Field(min_length=1)
    thresholds: Thresholds | None = None


# --- responses -------------------------------------------------------------------------------------


class Reproducer(_Open):
    command: str
    spec_id: str
    spec_version: int
    seed: str
    inputs: dict[str, Any] = {}
    matrix_entry: dict[str, Any] = {}


class ReplicaRun(_Open):
    index: int
    seed: str
    run_id: str
    status: str = Field(description="pending|queued|running|passed|failed|errored|cancelled")
    verdict: Literal["pass", "fail", "error"] | None = None
    score: float | None = None
    invariant_results: list[dict[str, Any]] = []
    duration_ms: int | None = None
    wall_ms: int | None = None
    cost_usd: float | None = None
    error: str | None = None
    attempts: int = 0
    trace_ids: list[str] = []
    reproducer: Reproducer


class ScenarioResult(_Open):
    """One matrix entry run `replicas` times. `verdict` per SPEC rules 6-7 (pass, fail, flaky,
    error); `passed` is the spec's replica_aggregation strategy outcome."""

    id: str
    experiment_id: str
    index: int
    matrix_entry: dict[str, Any]
    status: str = Field(description="created|queued|running|pass|fail|flaky|error|cancelled")
    verdict: Literal["pass", "fail", "flaky", "error"] | None = None
    passed: bool | None = None
    replicas: int
    completed_runs: int
    passed_runs: int
    failed_runs: int
    errored_runs: int
    pass_rate: float | None = None
    pass_rate_ci: list[float] | None = None
    score: float | None = None
    invariant_scores: dict[str, float] = {}
    invariants: list[dict[str, Any]] = []
    cost_usd: float | None = None
    seeds: list[str]
    run_ids: list[str]
    trace_ids: list[str] = []
    reproducer: Reproducer | None = None
    runs: list[ReplicaRun] = []


class MetricsSummary(_Open):
    total_runs: int
    passed_runs: int
    failed_runs: int
    errored_runs: int
    pass_rate: float | None = None
    pass_rate_ci: list[float] | None = Field(default=None, description="95% Wilson interval")
    total_cost_usd: float
    mean_cost_per_run_usd: float | None = None
    mean_wall_ms: float | None = None
    p95_wall_ms: float | None = None
    total_tool_calls: int
    mean_tool_calls: float | None = None
    tool_success_rate: float | None = None
    side_effect_violations: int


class ExperimentRecord(_Open):
    id: str
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


class RunResultsMetrics(MetricsSummary):
    verdicts: dict[str, int] = Field(description="scenario verdict counts: pass, fail, flaky, error")


class RunResults(ExperimentRecord):
    experiment_id: str
    scenarios: list[ScenarioResult]
    metrics: RunResultsMetrics


class ExperimentRunAccepted(BaseModel):
    id: str
    status: Literal["running"]
    total_runs: int


class ExperimentMetrics(BaseModel):
    """Run-level metrics: pass_rate = passed runs / finished runs; wall time measured around the
    whole scenario (boot, setup, agent, scoring); cost from the runner, else trace events; tool
    metrics from tool_call trace events."""

    experiment_id: str
    summary: MetricsSummary
    tool_breakdown: dict[str, dict[str, Any]] = Field(description="tool -> {count, mean_ms, error_rate}")
    cost_trend: list[dict[str, Any]] = Field(description="[{run_id, cost_usd, ts, scenario_id, replica_index}] in completion order")
    pass_rate_trend: list[dict[str, Any]] = Field(description="[{run_id, pass_rate (cumulative), ts, status, ...}]")


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


class ReplicaSuite(_Open):
    """`failed` counts every replica that did not pass (`errored` is the subset that errored);
    `failure_rate` = failed / finished replicas."""

    id: str
    run_id: str | None
    spec_id: str
    spec_version: int
    n_replicas: int
    status: Literal["running", "complete", "errored"]
    passed: int
    failed: int
    errored: int
    failure_rate: float | None = None
    pass_rate_ci: list[float] | None = None
    verdict: Literal["pass", "fail", "flaky", "error"] | None = None
    seeds: list[str]
    replicas: list[dict[str, Any]]


class HistoryItem(BaseModel):
    experiment_id: str
    name: str
    status: str
    created_at: str
    spec_version: int
    pass_rate: float | None = None
    total_cost_usd: float | None = None
    p95_wall_ms: float | None = None
