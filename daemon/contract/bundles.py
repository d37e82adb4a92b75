"""The experiment a baseline bundle carries (`svc eval export --bundle`): the exported RunResults,
as `POST /v1/experiments/import` stores it and `POST /v1/experiments/compare` reads it.

A bundle is the tenant's own input, so every key the daemon stores or reads from it is declared here
with its JSON type (strict: no string for a number, no number for a string, no boolean for a number)
and its shape (ids as path ids, spec ids as spec ids), and the whole body is checked before anything
is written: a mistyped field is a 400 naming it, never an experiment that fails every read
(tests/security/test_import_hostile.py). The keys an export also carries but the daemon recomputes on
read (pass rates, intervals, trace ids, ...) are let through as given and never stored."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from daemon.contract.common import ID_PATTERN, JsonValue

Id = Annotated[str, Field(pattern=ID_PATTERN)]
Timestamp = Annotated[str, Field(min_length=1, max_length=64)]


def _whole(value: object) -> object:
    """JSON Schema's integer takes a whole-valued number such as 18000.0 (an exporter may write one);
    strict parsing still refuses strings and booleans."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Count = Annotated[int, Field(ge=0), BeforeValidator(_whole)]
AtLeastOne = Annotated[int, Field(ge=1), BeforeValidator(_whole)]


class BundlePart(BaseModel):
    """Part of an exported RunResults: declared keys strictly typed, other keys kept as given
    (derived views this daemon recomputes)."""
    model_config = ConfigDict(extra="allow", strict=True)


class BundleInvariantResult(BundlePart):
    """One invariant's result of a replica run (what the scenario's invariant counts are made from)."""
    invariant_id: str | None = None
    name: str | None = None
    status: str | None = Field(default=None, description="passed | failed | skipped")
    score: float | None = None


class BundleReproducer(BundlePart):
    command: str | None = None
    inputs: dict[str, JsonValue] | None = None
    pins: dict[str, JsonValue] | None = None


class BundleRun(BundlePart):
    """One replica run of a scenario, as exported."""
    index: Count | None = Field(default=None, description="default: its position")
    seed: str | None = Field(default=None, max_length=128)
    run_id: Id | None = Field(default=None, description="its id where it ran (kept as imported_run_id; the run gets a new id)")
    status: Literal["passed", "failed", "errored"]
    verdict: Literal["pass", "fail", "error"] | None = None
    score: float | None = None
    invariant_results: list[BundleInvariantResult] | None = None
    duration_ms: Count | None = None
    wall_ms: Count | None = None
    cost_usd: float | None = Field(default=None, ge=0)
    error: str | None = None
    reason: str | None = None
    attempts: AtLeastOne | None = None
    previous_run_ids: list[Id] | None = None
    reproducer: BundleReproducer | None = None
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None


class BundleScenario(BundlePart):
    """One scenario (matrix entry) with its replica runs, as exported."""
    index: Count | None = Field(default=None, description="its matrix index (default: its position)")
    matrix_entry: dict[str, JsonValue] | None = None
    replicas: AtLeastOne | None = None
    status: str | None = None
    verdict: Literal["pass", "fail", "flaky", "error"] | None = None
    passed: bool | None = None
    score: float | None = None
    finished_at: Timestamp | None = None
    runs: list[BundleRun]


class BundleMetrics(BundlePart):
    """The experiment's metrics block (RunResultsMetrics): its MetricsSummary keys become the
    imported experiment's summary; the others are recomputed here."""
    total_runs: Count
    passed_runs: Count
    failed_runs: Count
    errored_runs: Count
    pass_rate: float | None
    pass_rate_ci: list[float] | None
    total_cost_usd: float
    mean_cost_per_run_usd: float | None
    mean_wall_ms: float | None
    p95_wall_ms: float | None
    total_tool_calls: Count
    mean_tool_calls: float | None
    tool_success_rate: float | None
    side_effect_violations: Count


class BundleExperiment(BundlePart):
    """The baseline experiment's RunResults."""
    id: Id = Field(description="its id where it ran (kept in `imported.experiment_id`)")
    name: str | None = Field(default=None, min_length=1, max_length=200, description="required by an import")
    status: Literal["created", "running", "completed", "failed", "cancelled"]
    created_at: Timestamp | None = Field(default=None, description="required by an import")
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    replicas: Annotated[int, Field(ge=1, le=1000), BeforeValidator(_whole)] | None = None
    matrix: list[dict[str, JsonValue]] | None = None
    seed: str | None = Field(default=None, max_length=128)
    scenarios: list[BundleScenario]
    metrics: BundleMetrics
    dataset: dict[str, JsonValue] | None = Field(default=None, description="the dataset version it ran over")
