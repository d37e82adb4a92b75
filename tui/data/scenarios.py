"""Scenario rows (one per replica run), invariant results, forbidden-rule violations, runs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui.data.common import TERMINAL_RUN, as_float, as_int, pick, verdict


# --- scenarios ------------------------------------------------------------------------------------


@dataclass
class InvariantRow:
    name: str
    status: str
    score: float | None = None
    weight: float | None = None
    gate: bool = False
    evidence: Any = None
    message: str = ""

    @classmethod
    def parse(cls, raw: dict, name: str | None = None) -> "InvariantRow":
        status = pick(raw, "status", "verdict")
        if status is None and "passed" in raw:
            status = "passed" if raw.get("passed") else "failed"
        return cls(
            name=str(name or pick(raw, "name", "invariant_id", "id", default="?")),
            status=verdict(status or "?"),
            score=as_float(pick(raw, "score")),
            weight=as_float(pick(raw, "weight")),
            gate=bool(pick(raw, "gate", default=False)),
            evidence=pick(raw, "evidence"),
            message=str(pick(raw, "message", "reason", "error", default="")),
        )


def invariant_rows(raw: Any) -> list[InvariantRow]:
    if isinstance(raw, dict):  # {name: result}
        return [InvariantRow.parse(v if isinstance(v, dict) else {"status": v}, k) for k, v in raw.items()]
    return [InvariantRow.parse(x) for x in raw or [] if isinstance(x, dict)]


@dataclass
class Violation:
    rule: str
    message: str
    event: dict | None = None
    event_index: int | None = None

    @classmethod
    def parse(cls, raw: dict) -> "Violation":
        event = pick(raw, "event", "audit_event", "offending_event")
        return cls(
            rule=str(pick(raw, "rule", "name", "forbidden", "kind", default="?")),
            message=str(pick(raw, "message", "reason", "detail", default="")),
            event=event if isinstance(event, dict) else None,
            event_index=as_int(pick(raw, "event_index", "index", "event.index", "line")),
        )


@dataclass
class ScenarioRow:
    """One replica run of a scenario (a scenario = one matrix entry run `replicas` times). With one
    replica per scenario, rows and scenarios are the same thing."""

    id: str
    status: str
    scenario_id: str = ""
    scenario_index: int | None = None
    scenario_verdict: str = ""
    score: float | None = None
    replica: int | None = None
    matrix: Any = None
    duration_ms: float | None = None
    cost_usd: float | None = None
    run_id: str | None = None
    sandbox_id: str | None = None
    trace_ids: list[str] = field(default_factory=list)
    seed: str | None = None
    reproducer: str | None = None
    invariants: list[InvariantRow] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    error: str = ""
    name: str = ""
    raw: dict = field(default_factory=dict)

    @property
    def matrix_label(self) -> str:
        if isinstance(self.matrix, dict):
            return ",".join(f"{k}={v}" for k, v in self.matrix.items())
        return "" if self.matrix is None else str(self.matrix)

    @property
    def label(self) -> str:
        base = self.name or (f"#{self.scenario_index}" if self.scenario_index is not None else self.scenario_id or self.id)
        return base

    @property
    def key(self) -> str:
        """Identifies the same replica across two experiments of one spec."""
        return f"{self.matrix_label}#{self.replica if self.replica is not None else 0}"

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "error") or self.scenario_verdict in ("fail", "error", "flaky")

    def matches_verdict(self, wanted: str) -> bool:
        if wanted == "all":
            return True
        if wanted == "failing":
            return self.failed
        if wanted == "flaky":
            return self.scenario_verdict == "flaky"
        return self.status == wanted

    @classmethod
    def parse(cls, raw: dict, scenario: dict | None = None) -> "ScenarioRow":
        """A replica dict (`raw`) inside its scenario dict, or a flat scenario dict alone."""
        scn = scenario if scenario is not None else {}
        traces = pick(raw, "trace_ids", "traces", "trace_id", default=[])
        if isinstance(traces, str):
            traces = [traces]
        trace_ids = [t if isinstance(t, str) else str(pick(t, "trace_id", "id", default="")) for t in traces if t]
        repro = pick(raw, "reproducer") or pick(scn, "reproducer")
        error = pick(raw, "error", "error_message", "reason")
        if isinstance(error, dict):
            error = " ".join(str(v) for v in error.values() if v)
        violations = pick(raw, "violations", "forbidden_violations", default=[])
        status = pick(raw, "verdict") or pick(raw, "status", default="queued")
        return cls(
            id=str(pick(raw, "run_id", "id", "scenario_id", default="?")),
            status=verdict(status),
            scenario_id=str(pick(scn, "id", default=pick(raw, "scenario_id", default="")) or ""),
            scenario_index=as_int(pick(scn, "index", default=pick(raw, "scenario_index"))),
            scenario_verdict=verdict(pick(scn, "verdict", default=pick(raw, "scenario_verdict", default="")) or ""),
            score=as_float(pick(raw, "composite", "score", "scores.composite", "composite_score")),
            replica=as_int(pick(raw, "index", "replica", "replica_index")),
            matrix=pick(scn, "matrix_entry", "matrix", default=pick(raw, "matrix_entry", "matrix", "params")),
            duration_ms=as_float(pick(raw, "wall_ms", "duration_ms", "mean_wall_ms", "duration")),
            cost_usd=as_float(pick(raw, "cost_usd", "total_cost_usd", "costs.total_usd", "cost.total_usd", "cost.estimated_usd")),
            run_id=pick(raw, "run_id", "run.id"),
            sandbox_id=pick(raw, "sandbox_id", "run.sandbox_id"),
            trace_ids=[t for t in trace_ids if t],
            seed=None if pick(raw, "seed") is None else str(pick(raw, "seed")),
            reproducer=pick(repro, "command") if isinstance(repro, dict) else repro,
            invariants=invariant_rows(pick(raw, "invariant_results", "invariants")),
            violations=[Violation.parse(v) for v in violations if isinstance(v, dict)] if isinstance(violations, list) else [],
            error="" if error is None else str(error),
            name=str(pick(raw, "name", default="")),
            raw=raw,
        )


def scenario_rows(scenario: dict) -> list[ScenarioRow]:
    """Every replica run of one scenario of RunResults (or the scenario itself when it lists none)."""
    runs = [r for r in scenario.get("runs") or [] if isinstance(r, dict)]
    if not runs:
        flat = dict(scenario)
        flat.setdefault("run_id", (scenario.get("run_ids") or [None])[0])
        return [ScenarioRow.parse(flat, scenario)]
    return [ScenarioRow.parse(run, scenario) for run in runs]


@dataclass


# --- runs, sandboxes, diffs --------------------------------------------------------------------------


@dataclass
class RunInfo:
    id: str
    status: str
    score: float | None
    seed: str | None
    sandbox_id: str | None
    spec_id: str | None
    duration_ms: float | None
    invariants: list[InvariantRow]
    violations: list[Violation]
    trajectory_url: str | None
    reproducer: str | None
    reason: str = ""
    cost_usd: float | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_RUN

    @classmethod
    def parse(cls, raw: dict) -> "RunInfo":
        repro = raw.get("reproducer")
        error = raw.get("error")
        reason = raw.get("reason") or (error.get("message") if isinstance(error, dict) else error) or ""
        results = [r for r in (raw.get("invariant_results") or []) + (raw.get("forbidden_results") or []) if isinstance(r, dict)]
        return cls(
            id=str(raw.get("id", "?")),
            status=verdict(raw.get("verdict") or raw.get("status")),
            score=as_float(raw.get("score")),
            seed=None if raw.get("seed") is None else str(raw.get("seed")),
            sandbox_id=raw.get("sandbox_id"),
            spec_id=raw.get("spec_id"),
            duration_ms=as_float(raw.get("duration_ms")),
            invariants=invariant_rows(results),
            violations=[Violation.parse(v) for v in raw.get("violations") or [] if isinstance(v, dict)],
            trajectory_url=raw.get("trajectory_url"),
            reproducer=pick(repro, "command") if isinstance(repro, dict) else repro,
            reason=str(reason),
            cost_usd=as_float(pick(raw, "cost.total_usd", "cost.estimated_usd", "cost_usd")),
        )
