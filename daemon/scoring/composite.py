"""The composite score and the scenario verdict (SPEC "Scoring rules" 1-5 and 7). Pure functions.

1. each invariant yields a score in [0, 1] (a passed check 1, a failed one 0, unless the check is
   graded and reports its own score);
2. composite = sum(weight x score) / sum(weight) over the invariants that were scored;
3. a failed `gate: true` invariant forces the composite to 0 and fails the scenario;
4. composite >= pass_threshold gives `pass`, otherwise `fail`;
5. any forbidden-rule violation fails the scenario even when every invariant passes;
7. `error` when the sandbox did not boot, the agent exceeded its timeout, or a check could not be
   evaluated (a judge infrastructure failure is `skipped`, never a 0).

Precedence: infrastructure error (boot, agent timeout, cancelled) > forbidden violation > failed gate
> skipped check (error) > threshold.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

EPSILON = 1e-9
RUN_STATUS = {"pass": "passed", "fail": "failed", "error": "errored"}


@dataclass
class Composite:
    score: float | None
    verdict: str  # pass | fail | error
    reasons: list[str] = field(default_factory=list)
    gates_failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def run_status(self) -> str:
        return RUN_STATUS[self.verdict]

    def as_dict(self) -> dict[str, Any]:
        return {"score": self.score, "verdict": self.verdict, "reasons": self.reasons,
                "gates_failed": self.gates_failed, "skipped": self.skipped}


def invariant_score(result: dict[str, Any]) -> float | None:
    """The [0, 1] score of one InvariantResult dict; None when skipped."""
    status = result.get("status")
    if status == "skipped":
        return None
    score = result.get("score")
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        return min(1.0, max(0.0, float(score)))
    return 1.0 if status == "passed" else 0.0


def weighted_mean(results: Iterable[dict[str, Any]]) -> float | None:
    total_weight = 0.0
    total = 0.0
    for result in results:
        score = invariant_score(result)
        if score is None:
            continue
        weight = float(result.get("weight", 1.0))
        total_weight += weight
        total += weight * score
    if total_weight <= 0:
        return None
    return total / total_weight


def compose(
    results: list[dict[str, Any]],
    *,
    pass_threshold: float = 1.0,
    violations: list[dict[str, Any]] | None = None,
    error: str | None = None,
) -> Composite:
    """Composite score and verdict from InvariantResult dicts (`status`, optional `score`,
    `weight`, `gate`), forbidden-rule `violations`, and an infrastructure `error` reason."""
    violations = violations or []
    score = weighted_mean(results)
    gates_failed = [r["invariant_id"] for r in results if r.get("gate") and r.get("status") == "failed"]
    skipped = [r["invariant_id"] for r in results if r.get("status") == "skipped"]
    if gates_failed:
        score = 0.0
    if score is not None:
        score = round(score, 6)
    reasons: list[str] = []
    if error:
        reasons.append(error)
        return Composite(score, "error", reasons, gates_failed, skipped)
    if violations:
        rules = sorted({v.get("rule", "?") for v in violations})
        reasons.append(f"forbidden rule violated: {', '.join(rules)}")
    if gates_failed:
        reasons.append(f"gate failed: {', '.join(gates_failed)} (composite forced to 0)")
    if violations or gates_failed:
        return Composite(score, "fail", reasons, gates_failed, skipped)
    if skipped:
        reasons.append(f"could not evaluate: {', '.join(skipped)}")
        return Composite(score, "error", reasons, gates_failed, skipped)
    if score is None:
        reasons.append("no invariant could be scored")
        return Composite(None, "error", reasons, gates_failed, skipped)
    if score + EPSILON >= pass_threshold:
        return Composite(score, "pass", reasons, gates_failed, skipped)
    reasons.append(f"composite {score:.3f} is below pass_threshold {pass_threshold:g}")
    return Composite(score, "fail", reasons, gates_failed, skipped)
