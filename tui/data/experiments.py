"""Experiments: list rows, the spec's history, metrics, RunResults and comparisons."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from pydantic import ValidationError

from tui.data.common import TERMINAL_EXPERIMENT, VERDICTS, as_float, verdict
from tui.data.effects import EffectDiffRow, effect_rows
from tui.data.scenarios import ScenarioRow, scenario_rows

if TYPE_CHECKING:
    from daemon.contract.experiments import ComparisonResult, ExperimentMetrics, ExperimentRecord, HistoryItem, RunResults
    from daemon.contract.experiments import MetricsSummary as MetricsSummary_


# --- experiments -----------------------------------------------------------------------------------


@dataclass
class ExperimentRow:
    id: str
    name: str
    spec_id: str
    status: str
    created_at: str | None = None
    total: int | None = None
    done: int | None = None
    pass_rate: float | None = None
    cost_usd: float | None = None
    p95_wall_ms: float | None = None
    spec_version: int | None = None
    state: str = ""  # the contract's ExperimentStatus (`status` is how it is shown)

    @property
    def terminal(self) -> bool:
        return (self.state or self.status) in TERMINAL_EXPERIMENT

    def matches(self, needle: str) -> bool:
        needle = needle.lower().strip()
        return not needle or any(needle in (v or "").lower() for v in (self.id, self.name, self.spec_id, self.status))

    @classmethod
    def of(cls, record: ExperimentRecord | RunResults) -> "ExperimentRow":
        """A list item (ExperimentRecord: metrics in `summary` once finished) or the header of
        RunResults (metrics in `metrics`)."""
        from daemon.contract.experiments import RunResults

        summary = record.metrics if isinstance(record, RunResults) else record.summary
        pass_rate, cost, p95 = (summary.pass_rate, summary.total_cost_usd, summary.p95_wall_ms) if summary else (None, None, None)
        return cls(
            id=record.id,
            name=record.name,
            spec_id=record.spec_id,
            status=verdict(record.status),
            created_at=record.created_at,
            total=record.total_runs,
            done=record.completed_runs,
            pass_rate=as_float(pass_rate),
            cost_usd=as_float(cost),
            p95_wall_ms=as_float(p95),
            spec_version=record.spec_version,
            state=record.status,
        )

    def absorb_metrics(self, summary: "MetricsSummary") -> None:
        self.pass_rate = summary.pass_rate if summary.pass_rate is not None else self.pass_rate
        self.cost_usd = summary.total_cost_usd if summary.total_cost_usd is not None else self.cost_usd
        self.p95_wall_ms = summary.p95_wall_ms if summary.p95_wall_ms is not None else self.p95_wall_ms
        if self.total is None and summary.total_runs is not None:
            self.total = summary.total_runs


@dataclass
class HistoryPoint:
    experiment_id: str
    pass_rate: float | None
    cost_usd: float | None
    p95_wall_ms: float | None
    created_at: str | None

    @classmethod
    def of(cls, item: HistoryItem) -> "HistoryPoint":
        return cls(
            experiment_id=item.experiment_id,
            pass_rate=item.pass_rate,
            cost_usd=item.total_cost_usd,
            p95_wall_ms=item.p95_wall_ms,
            created_at=item.created_at,
        )


def history_points(items: list[HistoryItem]) -> list[HistoryPoint]:
    points = [HistoryPoint.of(x) for x in items]
    points.sort(key=lambda p: p.created_at or "")
    return points


@dataclass
class MetricsSummary:
    total_runs: int | None = None
    pass_rate: float | None = None
    pass_rate_low: float | None = None
    pass_rate_high: float | None = None
    total_cost_usd: float | None = None
    mean_cost_per_run_usd: float | None = None
    mean_wall_ms: float | None = None
    p95_wall_ms: float | None = None
    total_tool_calls: int | None = None
    tool_success_rate: float | None = None
    tools: list[tuple[str, int | None, float | None, float | None]] = field(default_factory=list)

    @classmethod
    def of(cls, metrics: ExperimentMetrics) -> "MetricsSummary":
        """GET /v1/metrics/experiments/{id}: `summary` (a MetricsSummary) and `tool_breakdown`."""
        tools = [(name, stats.count, stats.mean_ms, stats.error_rate) for name, stats in sorted(metrics.tool_breakdown.items())]
        return cls.of_results(metrics.summary, tools)

    @classmethod
    def of_results(cls, metrics: MetricsSummary_, tools: list | None = None) -> "MetricsSummary":
        """A MetricsSummary model (the `metrics` block of RunResults has no tool breakdown)."""
        low, high = metrics.pass_rate_ci if metrics.pass_rate_ci and len(metrics.pass_rate_ci) == 2 else (None, None)
        return cls(
            total_runs=metrics.total_runs,
            pass_rate=metrics.pass_rate,
            pass_rate_low=low,
            pass_rate_high=high,
            total_cost_usd=metrics.total_cost_usd,
            mean_cost_per_run_usd=metrics.mean_cost_per_run_usd,
            mean_wall_ms=metrics.mean_wall_ms,
            p95_wall_ms=metrics.p95_wall_ms,
            total_tool_calls=metrics.total_tool_calls,
            tool_success_rate=metrics.tool_success_rate,
            tools=tools or [],
        )


@dataclass
class ExperimentDetail:
    row: ExperimentRow
    scenarios: list[ScenarioRow]  # one per replica run
    metrics: MetricsSummary
    verdicts: dict[str, int] | None = None  # scenario verdict counts, when the daemon reports them

    @classmethod
    def of(cls, results: RunResults) -> "ExperimentDetail":
        row = ExperimentRow.of(results)
        scenarios = [row for s in results.scenarios for row in scenario_rows(s)]
        metrics = MetricsSummary.of_results(results.metrics)
        row.absorb_metrics(metrics)
        if row.done is None and scenarios:
            row.done = sum(1 for s in scenarios if s.status in VERDICTS)
        return cls(row, scenarios, metrics, results.metrics.verdicts)

    @classmethod
    def parse(cls, raw: dict, fallback_id: str) -> "ExperimentDetail":
        """From a RunResults dict; a partial one (a stand-in launcher's) gives just the header."""
        from daemon.contract.experiments import RunResults

        try:
            return cls.of(RunResults.model_validate(raw))
        except ValidationError:
            row = ExperimentRow(id=str(raw.get("id") or fallback_id), name=str(raw.get("name") or ""),
                                spec_id=str(raw.get("spec_id") or ""), status=verdict(raw.get("status") or "created"))
            row.state = str(raw.get("status") or "")
            return cls(row, [], MetricsSummary())


# --- comparison ------------------------------------------------------------------------------------


@dataclass
class CompareMetric:
    name: str
    baseline: float | None
    candidate: float | None
    delta: float | None
    direction: str


@dataclass
class VerdictChange:
    """One scenario whose verdict changed, with a run of each side to open."""
    label: str
    before: str
    after: str
    baseline_run_id: str | None = None
    candidate_run_id: str | None = None


@dataclass
class Comparison:
    baseline_id: str
    candidate_id: str
    regressed: bool
    regressions: list[str]
    metrics: list[CompareMetric]
    verdict_changes: list[VerdictChange]
    baseline_name: str = ""
    candidate_name: str = ""
    decision: str = ""  # the gate's word: regressed | improved | no_change | inconclusive
    reason: str = ""
    quarantined: list[str] = field(default_factory=list)
    effects: list[EffectDiffRow] = field(default_factory=list)  # what the runs changed differently, per scenario
    baseline_source: str = "experiment"  # a bundle's runs are not in this daemon: their effects are not compared

    @classmethod
    def of(cls, result: ComparisonResult) -> "Comparison":
        metrics = [CompareMetric(name=m.name, baseline=m.baseline, candidate=m.candidate, delta=m.delta, direction=m.direction)
                   for m in result.metrics]
        changes = []
        for change in result.changed_scenarios:
            entry = change.matrix_entry
            label = ",".join(f"{k}={v}" for k, v in entry.items()) if entry else "(no matrix)"
            replica = change.replicas[0] if change.replicas else None
            changes.append(VerdictChange(label, verdict(change.baseline.verdict), verdict(change.candidate.verdict),
                                         replica.baseline_run_id if replica else None,
                                         replica.candidate_run_id if replica else None))
        return cls(
            baseline_id=result.baseline_id,
            candidate_id=result.candidate_id,
            regressed=result.regressed,
            regressions=list(result.regressions),
            metrics=metrics,
            verdict_changes=changes,
            baseline_name=result.baseline.name,
            candidate_name=result.candidate.name,
            decision=result.decision,
            reason=result.reason,
            quarantined=list(result.quarantined),
            effects=effect_rows(result.effects),
            baseline_source=result.baseline_source,
        )


def verdict_changes(baseline: Iterable[ScenarioRow], candidate: Iterable[ScenarioRow]) -> list[VerdictChange]:
    """Scenarios (matched by key) whose verdict differs between two experiments."""
    before = {s.key: s for s in baseline}
    changes = []
    for scenario in candidate:
        old = before.get(scenario.key)
        if old is not None and old.status != scenario.status:
            changes.append(VerdictChange(scenario.key, old.status, scenario.status, old.run_id, scenario.run_id))
    return changes
