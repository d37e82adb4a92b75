"""Score rows and per-rule aggregates of an experiment (GET /v1/experiments/{id}/scores) as the run
and experiment screens show them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from tui import format as f


@dataclass
class ExperimentScoreView:
    """Per-rule aggregates and, by span id, the latest rows (rule name, score, reason, judge error)."""

    rules: list[Any] = field(default_factory=list)
    by_span: dict[str, list[Any]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, body: dict[str, Any]) -> "ExperimentScoreView":
        from daemon.contract.scores import ExperimentScores  # lazily: importing tui loads no daemon module

        scores = ExperimentScores.model_validate(body)
        view = cls(rules=list(scores.rules), names={r.rule_id: r.name or r.rule_id for r in scores.rules})
        for row in scores.items:
            view.by_span.setdefault(row.span_id, []).append(row)
        return view


def rule_pass_rates(view: ExperimentScoreView | None, variables: dict) -> Text:
    """One line per rule: pass rate of the scored spans, mean score, unscored (judge errors in their colour)."""
    text = Text()
    for n, rule in enumerate(view.rules if view else []):
        if n:
            text.append("\n")
        text.append(f"{f.truncate(rule.name or rule.rule_id, 24)}  ", style="bold")
        text.append(f"pass {f.pct(rule.pass_rate)} of {rule.scored}  mean {f.score(rule.mean_score)}")
        if rule.unscored:
            text.append(f"  {rule.unscored} unscored (judge errors {f.pct(rule.judge_error_rate)})",
                        style=f.colour(variables, "warning"))
    return text


def span_scores(view: ExperimentScoreView | None, span_id: str, variables: dict) -> Text:
    """The span's scores: rule, score, reason; a judge error in its own colour instead of a score."""
    text = Text()
    for row in (view.by_span.get(span_id, []) if view else []):
        text.append(f"\nscore {f.truncate(view.names.get(row.rule_id, row.rule_id), 24)}: ", style="bold")
        if row.judge_error is not None:
            text.append(f"judge error {row.judge_error.code}: {f.truncate(row.judge_error.message, 120)}",
                        style=f.colour(variables, "warning"))
            continue
        text.append_text(f.styled("pass" if row.passed else "fail", variables, text=f.score(row.score)))
        if row.reason:
            text.append(f"  {f.truncate(row.reason, 200)}", style="dim")
    return text
