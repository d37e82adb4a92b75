"""Experiments: the requests, the experiment record, the list/scenario/history/export queries and the
strict result answers: RunResults (GET /v1/experiments/{id}) with its ScenarioResult, ReplicaRun and
Reproducer, the MetricsSummary, ExperimentMetrics (GET /v1/metrics/experiments/{id}) and the
ComparisonResult (POST /v1/experiments/compare). Every key the daemon returns is declared here; one
it does not declare fails the answer (daemon/http.py)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, WithJsonSchema, model_validator

from daemon.contract.bundles import AtLeastOne, BundleExperiment
from daemon.contract.effects import ScenarioEffects
from daemon.contract.common import JSON_VALUE_MARK, JsonValue, PageQuery, Query, Request, Response
from daemon.contract.specs import SPEC_ID_MAX, SPEC_ID_PATTERN

EXPERIMENT_STATUSES = ("created", "running", "completed", "failed", "cancelled")
MATRIX_PARAM_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# One matrix entry: at least one parameter, each named like an identifier (daemon.experiments.core
# checks it with the same pattern).
MatrixEntry = Annotated[dict[str, Any], WithJsonSchema({
    "type": "object", "minProperties": 1, "propertyNames": {"pattern": MATRIX_PARAM_PATTERN},
    "additionalProperties": {JSON_VALUE_MARK: "any"}})]
ExperimentStatus = Literal["created", "running", "completed", "failed", "cancelled"]
ScenarioStatusFilter = Literal["passed", "pass", "failed", "fail", "error", "errored", "flaky", "not_passed", "created",
                               "queued", "running", "cancelled"]


class ModelsBudget(Request):
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    max_calls: int | None = Field(default=None, gt=0)


class ExperimentCreate(Request):
    """Create an experiment: every matrix entry x `replicas` runs of one spec version.

    `replicas` and `matrix` override the spec's `parallelism`; `concurrency` caps this experiment's
    parallel runs (the global limit and the spec's `resources.concurrency_limit` still apply).
    `seed` is the base seed: replica seeds are derived from it and the replica's position
    (default: the experiment id), so the same `seed` reproduces every replica.
    `filter_failing_from` re-runs only the scenarios (matrix entries) that failed, were flaky or
    errored in that earlier experiment of the same spec. Secrets are held in memory only."""

    name: str | None = Field(default=None, min_length=1, max_length=200, description="default: the spec id")
    spec_id: str = Field(min_length=1, max_length=SPEC_ID_MAX, pattern=SPEC_ID_PATTERN)
    spec_version: int | None = Field(default=None, ge=1, description="default: latest")
    secrets: dict[str, str] | None = None
    replicas: int | None = Field(default=None, ge=1, le=1000)
    concurrency: int | None = Field(default=None, ge=1, le=1000)
    matrix: list[MatrixEntry] | None = Field(default=None, description="the scenarios to run instead of the spec's matrix")
    inputs: dict[str, JsonValue] | None = None
    seed: str | None = Field(default=None, min_length=1, max_length=128)
    filter_failing_from: str | None = None
    dataset_version: int | None = Field(default=None, ge=1, le=100, description=(
        "the version of the spec's parallelism.dataset to run over (default: the spec's, else the latest); 400 when "
        "the spec has no dataset"))
    replay_models_from: str | None = Field(default=None, min_length=1, max_length=128, description=(
        "an earlier experiment of the same spec: each replica's model calls are answered from the recording of the "
        "replica at the same matrix position and index there (no provider is called; its base seed is reused "
        "unless `seed` is given): iterate on the checks without model cost"))
    models_budget: ModelsBudget | None = Field(default=None, description="overrides the spec's models.budget for this experiment's runs")


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


class BundleSpec(Request):
    model_config = ConfigDict(extra="forbid", strict=True)
    id: str = Field(min_length=1, max_length=SPEC_ID_MAX, pattern=SPEC_ID_PATTERN)
    version: AtLeastOne
    digest: str = Field(pattern=r"^(sha256:)?[0-9a-f]{64}$", description="sha256 of the spec YAML")
    yaml: str | None = None


class BaselineBundle(Request):
    """A portable baseline (`svc eval export --bundle`): the experiment's RunResults, its metrics
    summary, the spec's digest and, optionally, its trace events. Every key the daemon reads is
    typed (daemon/contract/bundles.py): a mistyped one is a 400 naming it, before anything is stored."""
    model_config = ConfigDict(extra="forbid", strict=True)
    format: Literal["svc-baseline-bundle"]
    version: Literal[1]
    exported_at: str = Field(min_length=1, max_length=64)
    experiment: BundleExperiment = Field(description="RunResults of the baseline experiment")
    spec: BundleSpec
    traces: list[dict[str, JsonValue]] | None = None


class CompareRequest(Request):
    """Compare a candidate experiment with a baseline. Defaults (SPEC): pass_rate -2 points
    (absolute), p95_wall_ms +20% (relative), mean_cost_per_run_usd +20% (relative),
    tool_success_rate -5 points (absolute). Crossing a threshold strictly is a regression; the
    response echoes the thresholds used."""
    # exactly one baseline (a field left null counts as not given)
    model_config = ConfigDict(extra="forbid", json_schema_extra={"anyOf": [
        {"required": ["baseline_id"], "properties": {"baseline_id": {"type": "string"}, "baseline_bundle": {"type": "null"}}},
        {"required": ["baseline_bundle"], "properties": {"baseline_bundle": {"type": "object"}, "baseline_id": {"type": "null"}}}]})

    baseline_id: str | None = Field(default=None, min_length=1, description="the baseline experiment (or baseline_bundle)")
    baseline_bundle: BaselineBundle | None = Field(default=None, description="a baseline exported with `svc eval export --bundle`, "
                                                   "compared without importing it")
    candidate_id: str = Field(min_length=1)
    thresholds: Thresholds | None = None
    level: float = Field(default=0.05, gt=0, lt=1, description="significance level of the paired test")
    gate_thresholds: bool = Field(default=False, description="also regress on a crossed fixed threshold")
    allow_spec_change: bool = Field(default=False, description="compare with a bundle whose spec digest differs")

    @model_validator(mode="after")
    def _one_baseline(self) -> "CompareRequest":
        if (self.baseline_id is None) == (self.baseline_bundle is None):
            raise ValueError("give exactly one of baseline_id and baseline_bundle")
        return self


# --- responses -------------------------------------------------------------------------------------


class MetricsSummary(Response):
    """Run-level numbers over the finished replica runs of an experiment (errored runs count as not
    passed). Cached on the experiment when it finishes."""
    total_runs: int = Field(description="finished replica runs")
    passed_runs: int
    failed_runs: int
    errored_runs: int
    pass_rate: float | None = Field(description="passed / finished runs; null before any run finished")
    pass_rate_ci: list[float] | None = Field(description="95% Wilson interval [low, high]")
    total_cost_usd: float
    mean_cost_per_run_usd: float | None
    mean_wall_ms: float | None
    p95_wall_ms: float | None = Field(description="nearest rank")
    total_tool_calls: int
    mean_tool_calls: float | None
    tool_success_rate: float | None = Field(description="share of tool calls with status ok; null without tool calls")
    side_effect_violations: int


class ImportedFrom(Response):
    """Where an imported experiment (`svc eval import`) came from."""
    experiment_id: str = Field(description="its id in the daemon that ran it")
    exported_at: str
    spec_digest: str


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
    summary: MetricsSummary | None = Field(default=None, description="set once finished")
    imported: ImportedFrom | None = Field(default=None, description="set when it was imported from a baseline bundle")


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


class ExperimentExtend(Request):
    """Body of `POST /v1/experiments/{id}/extend`: up to `runs` more replicas, spread over the
    scenarios whose verdict is still undecided (flaky), or over the scenarios named; secrets to send again."""

    runs: int = Field(ge=1, le=1000)
    secrets: dict[str, str] | None = None
    scenario_ids: list[str] | None = Field(default=None, min_length=1, max_length=10000,
                                           description="spread the runs round-robin over these scenarios of the experiment, in "
                                                       "this order, whatever their verdict (the gate's --adaptive); default: the "
                                                       "undecided ones in matrix order")


class ExtendedScenario(Response):
    scenario_id: str
    matrix_entry: dict[str, Any]
    added: int = Field(description="replicas added")


class ExperimentExtended(Response):
    id: str
    status: Literal["running", "completed"] = Field(description="completed when no scenario was undecided (nothing added)")
    added_runs: int = Field(description="runs spent")
    undecided: int = Field(description="scenarios the runs were spread over: those whose verdict was undecided (flaky), or "
                                       "the scenario_ids named")
    scenarios: list[ExtendedScenario]


class ExperimentToolStats(Response):
    count: int
    mean_ms: float | None
    error_rate: float


class CostPoint(Response):
    run_id: str
    scenario_id: str | None
    replica_index: int
    ts: str | None = Field(description="when the run finished")
    cost_usd: float


class PassRatePoint(Response):
    run_id: str
    scenario_id: str | None
    replica_index: int
    ts: str | None = Field(description="when the run finished")
    status: str = Field(description="passed|failed|errored")
    pass_rate: float = Field(description="cumulative, up to this run")


class ExperimentMetrics(Response):
    """Run-level metrics of an experiment: summary, per-tool breakdown, trends in completion order."""
    experiment_id: str
    summary: MetricsSummary
    tool_breakdown: dict[str, ExperimentToolStats] = Field(description="tool name -> {count, mean_ms, error_rate}")
    cost_trend: list[CostPoint]
    pass_rate_trend: list[PassRatePoint]


class DatasetUsed(Response):
    """The dataset version an experiment's scenarios are records of (`parallelism.dataset`)."""
    id: str
    version: int
    digest: str = Field(description="sha256 of that version's records")
    tags: list[str] | None = Field(description="only records with any of these tags ran")


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
    dataset: DatasetUsed | None = Field(description="the dataset version it ran over; null without a dataset")


# --- RunResults -------------------------------------------------------------------------------------


class ReproducerDataset(Response):
    """The dataset record a dataset scenario ran over; its `matrix_entry.record_id` makes a replay read it again."""
    id: str
    version: int
    record_id: str


class Reproducer(Response):
    """What replays exactly one replica: same spec version, seed, inputs and matrix entry."""
    command: str
    spec_id: str
    spec_version: int
    seed: str
    inputs: dict[str, Any]
    matrix_entry: dict[str, Any]
    dataset: ReproducerDataset | None = Field(default=None, description="a dataset scenario's record: {id, version, record_id}")
    pins: dict[str, Any] | None = Field(default=None, description="what the run resolved: {agent_snapshot_id, model_recording}")


class ScenarioReproducer(Reproducer):
    """The reproducer of the scenario's first replica that did not pass (else its first replica)."""
    replica_index: int
    run_id: str


class ReplicaRun(Response):
    index: int
    seed: str
    run_id: str
    status: str | None = Field(description="pending|queued|running|passed|failed|errored|cancelled")
    verdict: Literal["pass", "fail", "error"] | None
    score: float | None
    invariant_results: list[dict[str, Any]] = Field(description="the run's InvariantResult objects")
    duration_ms: int | None = Field(description="the runner's duration of the run")
    wall_ms: int | None = Field(description="the scheduler's wall time around the whole scenario")
    cost_usd: float | None
    error: str | None
    reason: str | None = Field(description="the run's reason (why it failed or errored)")
    attempts: int
    previous_run_ids: list[str] = Field(description="ids of earlier attempts of this replica (retries, restarts)")
    trace_ids: list[str]
    trajectory_url: str | None
    reproducer: Reproducer
    started_at: str | None
    finished_at: str | None


class ScenarioInvariant(Response):
    """One invariant over the replicas of a scenario: outcome counts and the mean score."""
    invariant_id: str
    name: str
    passed: int
    failed: int
    skipped: int
    score: float | None


class ScenarioRecord(Response):
    """The dataset record a scenario ran over."""
    id: str
    key: str | None
    input: Any
    expected: Any = Field(description="null when the record has none")


class ScenarioResult(Response):
    """One matrix entry run `replicas` times. `verdict` per SPEC rules 6-7 (pass, fail, flaky,
    error); `passed` is the spec's replica_aggregation strategy outcome."""
    id: str
    experiment_id: str
    index: int
    matrix_entry: dict[str, Any]
    status: str = Field(description="created|queued|running|pass|fail|flaky|error|cancelled")
    verdict: Literal["pass", "fail", "flaky", "error"] | None
    passed: bool | None
    replicas: int
    completed_runs: int
    passed_runs: int
    failed_runs: int
    errored_runs: int
    pass_rate: float | None
    pass_rate_ci: list[float] | None = Field(description="95% Wilson interval [low, high]")
    score: float | None = Field(description="mean score of the finished replicas")
    invariant_scores: dict[str, float] = Field(description="invariant id -> mean score")
    invariants: list[ScenarioInvariant]
    cost_usd: float | None
    mean_wall_ms: int | None
    seeds: list[str]
    run_ids: list[str]
    trace_ids: list[str]
    errors: list[str] = Field(description="distinct errors of the finished replicas")
    reproducer: ScenarioReproducer | None
    finished_at: str | None
    pass_at_k: dict[str, float] = Field(description="k -> chance at least one of k replicas passes (k = 1..finished)")
    pass_hat_k: dict[str, float] = Field(description="k -> chance all of k replicas pass (pass^k)")
    record: ScenarioRecord | None = Field(description="a dataset scenario's record (its input and expected output); null "
                                          "otherwise")
    retried_runs: int = Field(description="earlier attempts of its replicas that were retried (infrastructure errors, "
                              "daemon restarts); each is kept in its replica's previous_run_ids")
    runs: list[ReplicaRun]


class ExperimentAggregation(Response):
    """The spec's replica_aggregation and pass threshold (majority / nulls when the spec is gone)."""
    strategy: str
    min_pass_rate: float | None
    pass_threshold: float | None


class ConcurrencyUsed(Response):
    """The global limits of runs at once that the experiment's runs started under: what the daemon
    chose (`resources.concurrency_limit: auto` follows the host) or what an operator fixed."""
    min: int | None
    max: int | None


class RunResultsMetrics(MetricsSummary):
    verdicts: dict[str, int] = Field(description="scenario verdict counts: pass, fail, flaky, error")
    scenarios: int
    scenarios_passed: int = Field(description="scenarios whose aggregation strategy passed")
    all_passed: bool = Field(description="every scenario's verdict is pass (false without scenarios)")
    pass_at_k: dict[str, float] = Field(description="mean over scenarios of pass@k")
    pass_hat_k: dict[str, float] = Field(description="mean over scenarios of pass^k")
    retried_runs: int = Field(description="retried attempts over all scenarios")
    time_budget_ms: dict[str, int] = Field(description=(
        "where the finished runs' time went, each part of Run.timings summed over them (queue_ms, boot_ms or "
        "claim_ms for a pooled sandbox, setup_ms within boot, task_ms, agent_ms, leftovers_ms, snapshot_ms, "
        "checks_ms, forbidden_ms, exports_ms, teardown_ms); divide by total_runs for a run's mean"))
    concurrency: ConcurrencyUsed


class RunResults(Response):
    """The experiment (its record without the cached summary), every scenario with its replicas,
    and the metrics block (always computed fresh)."""
    experiment_id: str
    id: str
    name: str
    spec_id: str
    spec_version: int
    status: ExperimentStatus
    created_at: str
    started_at: str | None
    finished_at: str | None
    total_runs: int
    completed_runs: int
    replicas: int | None
    concurrency: int | None
    matrix: list[dict[str, Any]]
    seed: str | None
    filter_failing_from: str | None
    secret_names: list[str] = Field(description="names only: values are never stored")
    error: str | None
    aggregation: ExperimentAggregation
    scenarios: list[ScenarioResult]
    metrics: RunResultsMetrics
    dataset: DatasetUsed | None = Field(description="the dataset version it ran over (each scenario's matrix_entry names its "
                                        "record_id); null without a dataset")
    imported: ImportedFrom | None = Field(description="where it came from when it was imported from a baseline bundle "
                                          "(svc eval import); null when it ran here")


# --- comparison -------------------------------------------------------------------------------------


class GateTest(Response):
    test: str
    p_value: float | None = Field(description="one-sided p-value in the direction of the change")
    decided: bool = Field(description="this test's p-value made the decision")


class MetricComparison(Response):
    name: str
    baseline: float | None
    candidate: float | None
    delta: float | None
    delta_pct: float | None = Field(description="delta relative to the baseline; null when the baseline is 0 or missing")
    direction: Literal["better", "same", "worse", "unknown"]
    higher_is_better: bool
    threshold: float | None = Field(description="signed; null for informational metrics")
    threshold_kind: Literal["absolute", "relative"] | None
    regressed: bool = Field(description="the gate fails on this metric (a significant regression, or a crossed threshold "
                            "with gate_thresholds)")
    message: str | None = Field(description="the regression, human-readable")
    threshold_crossed: bool = Field(description="the change is past the fixed threshold")
    decision: Literal["regressed", "improved", "no_change", "inconclusive"] = Field(
        description="the paired test's answer (untested metrics: no_change when equal, else inconclusive)")
    p_value: float | None = Field(description="one-sided p-value (in the direction of the change) of the test that decided "
                                  "(see test and test_reason)")
    interval: list[float] | None = Field(description="95% bootstrap interval of the mean paired difference (a relative change "
                                         "for wall time and cost)")
    test: str | None
    paired_scenarios: int | None = Field(description="scenarios paired by matrix entry that entered the test")
    drivers: list[dict[str, Any]] = Field(description="paired scenarios that moved, the largest move in the decision's direction first")
    test_reason: str | None = Field(default=None, description="why that test decided (a rule on the design, fixed before the "
                                    "outcome: the stratified exact test over replicas when a side has more than one replica)")
    tests: list[GateTest] = Field(default_factory=list, description="every test computed, the deciding one marked")
    reason: str | None = Field(default=None, description="one line: why the test answered so; for inconclusive, what would "
                               "decide it (replicas or scenarios to add)")


class ScenarioSide(Response):
    scenario_id: str | None
    verdict: Literal["pass", "fail", "flaky", "error"] | None
    pass_rate: float | None


class ReplicaChange(Response):
    index: int
    baseline: str | None = Field(description="the baseline replica's status")
    candidate: str | None = Field(description="the candidate replica's status")
    baseline_run_id: str | None
    candidate_run_id: str | None


class ChangedScenario(Response):
    matrix_entry: dict[str, Any]
    direction: Literal["better", "same", "worse", "changed"]
    baseline: ScenarioSide
    candidate: ScenarioSide
    replicas: list[ReplicaChange] = Field(description="replicas (matched by index) whose status changed")


class ExperimentBrief(Response):
    id: str
    name: str
    spec_id: str
    spec_version: int
    status: ExperimentStatus
    created_at: str


class ComparisonResult(Response):
    baseline_id: str
    candidate_id: str
    regressed: bool
    regressions: list[str] = Field(description="human-readable, one per regressed metric")
    metrics: list[MetricComparison]
    thresholds: dict[str, float] = Field(description="the thresholds used, signed")
    threshold_kinds: dict[str, Literal["absolute", "relative"]]
    changed_scenarios: list[ChangedScenario] = Field(description="scenarios matched by matrix entry whose verdict or replicas changed")
    only_in_baseline: list[dict[str, Any]] = Field(description="matrix entries")
    only_in_candidate: list[dict[str, Any]] = Field(description="matrix entries")
    same_spec: bool
    baseline: ExperimentBrief
    candidate: ExperimentBrief
    judge_warnings: list[str] = Field(description="one per side whose score rows have a judge error rate above 5%")
    level: float = Field(description="significance level of the paired test")
    gate_thresholds: bool = Field(description="crossed thresholds fail the gate too")
    decision: Literal["regressed", "improved", "no_change", "inconclusive"] = Field(
        description="the gate's word: regressed when a gated metric regressed; else inconclusive when the pass-rate test "
                    "could not tell; else improved or no_change (`svc eval compare --gate` exits 1, 2, 0, 0)")
    reason: str = Field(description="one line: why, and for inconclusive what would decide it")
    quarantined: list[str] = Field(description="the candidate's scenarios its spec's `quarantine:` list holds "
                                   "(key=value labels): run and reported, left out of the paired tests")
    baseline_source: Literal["experiment", "bundle"]
    effects: list[ScenarioEffects] = Field(
        description="scenarios whose runs' effects (daemon/effects) differ between the experiments, or between one side's "
                    "replicas; empty when the baseline is a bundle (its runs are not in this daemon)")
