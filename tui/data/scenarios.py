"""Scenario rows (one per replica run), invariant results, forbidden-rule violations, runs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:  # the contract is loaded with the first answer (client/typed.py), not on import
    from daemon.contract.experiments import ReplicaRun, Reproducer, ScenarioInvariant, ScenarioResult
    from daemon.contract.runs import InvariantResult, Run
from tui.data.common import TERMINAL_RUN, as_float, as_int, verdict


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
    def of(cls, result: InvariantResult, name: str | None = None) -> "InvariantRow":
        """One invariant (or forbidden rule) result of a run (also a run stream `invariant_result`
        event: `{type, invariant_id, status}`)."""
        extra = result.model_extra or {}
        message = next((extra[k] for k in ("message", "reason", "error") if extra.get(k) is not None), "")
        return cls(
            name=str(name or result.name or result.invariant_id),
            status=verdict(result.status or "?"),
            score=result.score,
            weight=result.weight,
            gate=bool(result.gate),
            evidence=result.evidence,
            message=str(message),
        )

    @classmethod
    def tally(cls, entry: ScenarioInvariant) -> "InvariantRow":
        """One of ScenarioResult.invariants: outcome counts over the replicas."""
        return cls(name=entry.name or entry.invariant_id, status=verdict("passed" if entry.passed else "failed"))


def invariant_rows(results: Iterable[dict | InvariantResult]) -> list[InvariantRow]:
    from daemon.contract.runs import InvariantResult

    return [InvariantRow.of(r if isinstance(r, InvariantResult) else InvariantResult.model_validate(r))
            for r in results if isinstance(r, (dict, InvariantResult))]


@dataclass
class Violation:
    rule: str
    message: str
    event: dict | None = None
    event_index: int | None = None

    @classmethod
    def of(cls, raw: dict) -> "Violation":
        """One of Run.violations: `{rule, code, source, message, event}`."""
        event = raw.get("event")
        event = event if isinstance(event, dict) else None
        return cls(
            rule=str(raw.get("rule") or "?"),
            message=str(raw.get("message") or ""),
            event=event,
            event_index=as_int(event.get("index")) if event else None,
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
    repro: Reproducer | None = None  # what re-runs this replica: spec version, seed, inputs, matrix entry
    previous_run_ids: list[str] = field(default_factory=list)  # earlier attempts of this replica, retried (infrastructure errors)
    scenario_retried: int = 0  # retried attempts over the scenario's replicas

    @property
    def retried(self) -> int:
        """Retried attempts of this replica (its run is the last of them)."""
        return len(self.previous_run_ids)

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
    def of(cls, scenario: ScenarioResult, run: ReplicaRun | None = None) -> "ScenarioRow":
        """One replica run of a scenario, or (`run` None, while the scenario lists no runs) the
        scenario itself."""
        repro = (run.reproducer if run is not None else None) or scenario.reproducer
        common: dict[str, Any] = dict(
            scenario_id=scenario.id,
            scenario_index=scenario.index,
            scenario_verdict=verdict(scenario.verdict or ""),
            matrix=scenario.matrix_entry,
            reproducer=repro.command if repro is not None else None,
            repro=repro,
            scenario_retried=scenario.retried_runs or 0,
        )
        if run is None:
            return cls(
                id=str(scenario.run_ids[0] if scenario.run_ids else scenario.id),
                status=verdict(scenario.verdict or scenario.status),
                score=scenario.score,
                replica=scenario.index,
                duration_ms=as_float(scenario.mean_wall_ms),
                cost_usd=scenario.cost_usd,
                run_id=scenario.run_ids[0] if scenario.run_ids else None,
                trace_ids=[t for t in scenario.trace_ids if t],
                invariants=[InvariantRow.tally(i) for i in scenario.invariants],
                **common,
            )
        error = run.error if run.error is not None else run.reason
        return cls(
            id=run.run_id,
            status=verdict(run.verdict or run.status or "queued"),
            score=run.score,
            replica=run.index,
            duration_ms=as_float(run.wall_ms if run.wall_ms is not None else run.duration_ms),
            cost_usd=run.cost_usd,
            run_id=run.run_id,
            trace_ids=[t for t in run.trace_ids if t],
            seed=run.seed,
            invariants=invariant_rows(run.invariant_results),
            error="" if error is None else str(error),
            previous_run_ids=[r for r in run.previous_run_ids if r],
            **common,
        )


def scenario_rows(scenario: ScenarioResult) -> list[ScenarioRow]:
    """Every replica run of one scenario of RunResults (or the scenario itself when it lists none)."""
    if not scenario.runs:
        return [ScenarioRow.of(scenario)]
    return [ScenarioRow.of(scenario, run) for run in scenario.runs]


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
    error_code: str = ""  # why an errored run errored: agent_timeout, boot_failed, budget_exceeded, ...
    error_step: str = ""
    error_message: str = ""
    agent_timeout_s: float | None = None
    reasons: list[str] = field(default_factory=list)  # the composite's reasons, each one line
    models_mode: str = ""  # live | replayed: who answered the agent's model calls (the model gateway)
    model_calls: int | None = None
    model_cost_usd: float | None = None
    model_budget_usd: float | None = None
    timings: dict[str, Any] = field(default_factory=dict)  # where its time went (Run.timings)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_RUN

    @classmethod
    def of(cls, run: Run) -> "RunInfo":
        error = run.error.get("message") if run.error else None
        failure = run.error or {}
        agent = run.agent or {}
        cost = run.cost or {}
        usd = cost.get("total_usd") if cost.get("total_usd") is not None else cost.get("estimated_usd")
        return cls(
            id=run.id,
            status=verdict(run.verdict or run.status),
            score=run.score,
            seed=run.seed,
            sandbox_id=run.sandbox_id,
            spec_id=run.spec_id,
            duration_ms=as_float(run.duration_ms),
            invariants=invariant_rows([*run.invariant_results, *run.forbidden_results]),
            violations=[Violation.of(v) for v in run.violations if isinstance(v, dict)],
            trajectory_url=run.trajectory_url,
            reproducer=run.reproducer.get("command") if run.reproducer else None,
            reason=str(run.reason or error or ""),
            cost_usd=as_float(usd),
            error_code=str(failure.get("code") or ""),
            error_step=str(failure.get("step") or ""),
            error_message=str(failure.get("message") or ""),
            agent_timeout_s=as_float(agent.get("timeout_s", agent.get("timeout"))),
            reasons=[r for r in str(run.reason or "").split("; ") if r] if not failure else [],
            models_mode=run.models.mode if run.models else "",
            model_calls=run.models.calls if run.models else None,
            model_cost_usd=run.models.cost_usd if run.models else None,
            model_budget_usd=as_float((run.models.budget or {}).get("cost_usd")) if run.models else None,
            timings=dict(run.timings or {}),
        )
