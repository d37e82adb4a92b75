"""Experiments: list rows, the spec's history, metrics, RunResults and comparisons."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from tui.data.common import TERMINAL_EXPERIMENT, VERDICTS, as_float, as_int, items, pick, verdict
from tui.data.scenarios import ScenarioRow, scenario_rows


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

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_EXPERIMENT

    def matches(self, needle: str) -> bool:
        needle = needle.lower().strip()
        return not needle or any(needle in (v or "").lower() for v in (self.id, self.name, self.spec_id, self.status))

    @classmethod
    def parse(cls, raw: dict) -> "ExperimentRow":
        return cls(
            id=str(pick(raw, "id", "experiment_id", default="?")),
            name=str(pick(raw, "name", default="")),
            spec_id=str(pick(raw, "spec_id", "spec.id", default="")),
            status=verdict(pick(raw, "status", "state", default="created")),
            created_at=pick(raw, "created_at"),
            total=as_int(pick(raw, "total_runs", "progress.total", "runs_total", "metrics.summary.total_runs", "summary.total_runs")),
            done=as_int(pick(raw, "completed_runs", "progress.done", "progress.completed", "runs_done", "finished_runs", "done_runs")),
            pass_rate=as_float(pick(raw, "pass_rate", "summary.pass_rate", "metrics.pass_rate", "metrics.summary.pass_rate")),
            cost_usd=as_float(pick(raw, "total_cost_usd", "summary.total_cost_usd", "metrics.total_cost_usd", "metrics.summary.total_cost_usd", "cost_usd")),
            p95_wall_ms=as_float(pick(raw, "p95_wall_ms", "summary.p95_wall_ms", "metrics.p95_wall_ms", "metrics.summary.p95_wall_ms")),
            spec_version=as_int(pick(raw, "spec_version")),
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
    def parse(cls, raw: dict) -> "HistoryPoint":
        return cls(
            experiment_id=str(pick(raw, "experiment_id", "id", default="")),
            pass_rate=as_float(pick(raw, "pass_rate")),
            cost_usd=as_float(pick(raw, "total_cost_usd", "cost_usd")),
            p95_wall_ms=as_float(pick(raw, "p95_wall_ms")),
            created_at=pick(raw, "created_at"),
        )


def history_points(page: Any) -> list[HistoryPoint]:
    points = [HistoryPoint.parse(x) for x in items(page)]
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
    def parse(cls, raw: Any) -> "MetricsSummary":
        raw = raw if isinstance(raw, dict) else {}
        summary = raw.get("summary") if isinstance(raw.get("summary"), dict) else raw
        interval = pick(summary, "pass_rate_ci", "pass_rate_interval", "wilson")
        low = high = None
        if isinstance(interval, dict):
            low, high = as_float(pick(interval, "low", "lower")), as_float(pick(interval, "high", "upper"))
        elif isinstance(interval, (list, tuple)) and len(interval) == 2:
            low, high = as_float(interval[0]), as_float(interval[1])
        tools = []
        breakdown = raw.get("tool_breakdown")
        if isinstance(breakdown, dict):
            for name, stats in sorted(breakdown.items()):
                stats = stats if isinstance(stats, dict) else {}
                tools.append((name, as_int(stats.get("count")), as_float(stats.get("mean_ms")), as_float(stats.get("error_rate"))))
        return cls(
            total_runs=as_int(pick(summary, "total_runs")),
            pass_rate=as_float(pick(summary, "pass_rate")),
            pass_rate_low=low,
            pass_rate_high=high,
            total_cost_usd=as_float(pick(summary, "total_cost_usd")),
            mean_cost_per_run_usd=as_float(pick(summary, "mean_cost_per_run_usd")),
            mean_wall_ms=as_float(pick(summary, "mean_wall_ms")),
            p95_wall_ms=as_float(pick(summary, "p95_wall_ms")),
            total_tool_calls=as_int(pick(summary, "total_tool_calls")),
            tool_success_rate=as_float(pick(summary, "tool_success_rate")),
            tools=tools,
        )


@dataclass
class ExperimentDetail:
    row: ExperimentRow
    scenarios: list[ScenarioRow]  # one per replica run
    metrics: MetricsSummary
    verdicts: dict[str, int] | None = None  # scenario verdict counts, when the daemon reports them

    @classmethod
    def parse(cls, raw: dict, fallback_id: str) -> "ExperimentDetail":
        header = dict(raw.get("experiment") or {}) if isinstance(raw.get("experiment"), dict) else dict(raw)
        header.setdefault("id", raw.get("experiment_id") or fallback_id)
        row = ExperimentRow.parse(header)
        scenarios = [row for s in raw.get("scenarios") or [] if isinstance(s, dict) for row in scenario_rows(s)]
        metrics = MetricsSummary.parse(raw.get("metrics") or {})
        row.absorb_metrics(metrics)
        if row.total is None and scenarios:
            row.total = len(scenarios)
        if row.done is None and scenarios:
            row.done = sum(1 for s in scenarios if s.status in VERDICTS)
        verdicts = pick(raw, "metrics.verdicts")
        return cls(row, scenarios, metrics, verdicts if isinstance(verdicts, dict) else None)


# --- comparison ------------------------------------------------------------------------------------


@dataclass
class CompareMetric:
    name: str
    baseline: float | None
    candidate: float | None
    delta: float | None
    direction: str


@dataclass
class Comparison:
    baseline_id: str
    candidate_id: str
    regressed: bool
    regressions: list[str]
    metrics: list[CompareMetric]
    verdict_changes: list[tuple[str, str, str]]

    @classmethod
    def parse(cls, raw: dict) -> "Comparison":
        metrics = []
        entries = raw.get("metrics") or []
        if isinstance(entries, dict):
            entries = [dict(v, name=k) for k, v in entries.items() if isinstance(v, dict)]
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            metrics.append(CompareMetric(
                name=str(entry.get("name", "?")),
                baseline=as_float(entry.get("baseline")),
                candidate=as_float(entry.get("candidate")),
                delta=as_float(entry.get("delta")),
                direction=str(entry.get("direction") or "same"),
            ))
        changes = []
        for change in pick(raw, "changed_scenarios", "verdict_changes", "scenario_changes", default=[]) or []:
            if not isinstance(change, dict):
                continue
            entry = change.get("matrix_entry")
            label = ",".join(f"{k}={v}" for k, v in entry.items()) if isinstance(entry, dict) and entry else "(no matrix)"
            before, after = change.get("baseline"), change.get("candidate")
            changes.append((
                str(pick(change, "scenario", "key", "name", default=label)),
                verdict(pick(before, "verdict") if isinstance(before, dict) else before),
                verdict(pick(after, "verdict") if isinstance(after, dict) else after),
            ))
        return cls(
            baseline_id=str(raw.get("baseline_id", "")),
            candidate_id=str(raw.get("candidate_id", "")),
            regressed=bool(raw.get("regressed")),
            regressions=[str(r) for r in raw.get("regressions") or []],
            metrics=metrics,
            verdict_changes=changes,
        )


def verdict_changes(baseline: Iterable[ScenarioRow], candidate: Iterable[ScenarioRow]) -> list[tuple[str, str, str]]:
    """Scenarios (matched by key) whose verdict differs between two experiments."""
    before = {s.key: s.status for s in baseline}
    changes = []
    for scenario in candidate:
        old = before.get(scenario.key)
        if old is not None and old != scenario.status:
            changes.append((scenario.key, old, scenario.status))
    return changes
