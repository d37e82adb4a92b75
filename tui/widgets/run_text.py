"""The text blocks of the run view: invariant results with evidence, forbidden-rule violations with
where their breaking event is shown, a span's details, the reproducer. Pure functions of the data
and the theme's colours."""
from __future__ import annotations

import json
from typing import Any, Callable

from rich.text import Text

from tui import format as f
from tui.data import InvariantRow, Span, Violation, event_summary

WHERE = {"audit": "audit log", "diff": "diff", "span": "trace"}


def checks_text(invariants: list[InvariantRow], violations: list[Violation],
                target_of: Callable[[Violation], tuple[str, Any] | None], variables: dict) -> Text:
    text = Text()
    text.append("Invariants\n", style="bold underline")
    if not invariants:
        text.append("  none reported yet\n", style="dim")
    for inv in invariants:
        mark = "✓" if inv.status in ("pass", "passed") else ("–" if inv.status == "skipped" else "✗")
        text.append(f" {mark} ", style=f.colour(variables, f.tone_of(inv.status)))
        text.append(inv.name, style="bold")
        extras = [f"score {f.score(inv.score)}" if inv.score is not None else "", f"w{inv.weight:g}" if inv.weight else "", "gate" if inv.gate else ""]
        text.append("  " + " ".join(e for e in extras if e) + "\n", style="dim")
        if inv.message:
            text.append(f"     {inv.message}\n")
        evidence = inv.evidence
        if isinstance(evidence, dict) and "violations" in evidence:  # listed under Forbidden rules
            evidence = {k: v for k, v in evidence.items() if k != "violations"}
        if evidence not in (None, {}, []):
            text.append(f"     {f.truncate(json.dumps(evidence, default=str), 400)}\n", style="dim")
    text.append("\nForbidden rules\n", style="bold underline")
    if not violations:
        text.append("  no violation\n", style=f.colour(variables, "success"))
    for violation in violations:
        text.append(f" ✗ {violation.rule}", style=f"bold {f.colour(variables, 'error')}")
        text.append(f"  {violation.message}\n")
        target = target_of(violation)
        where = WHERE.get(target[0], "") if target else ""
        text.append(f"     → {f.truncate(event_summary(violation.event), 90)}", style="dim")
        text.append(f"  (v: {where})\n" if where else "\n", style="dim")
    return text


def span_detail(span: Span | None, variables: dict) -> Text:
    if span is None:
        return Text("")
    text = Text()
    text.append(f"{span.event_type or 'span'} {span.name}", style="bold")
    text.append(f"  {span.span_id}", style="dim")
    if span.model:
        text.append(f"  {span.model} {span.input_tokens or 0}→{span.output_tokens or 0} tok {f.money(span.cost_usd)}")
    text.append(f"  {f.ms(span.duration_ms)}")
    if span.is_error:
        text.append(f"  {span.error_type or 'error'}", style=f"bold {f.colour(variables, 'error')}")
    if span.input:
        text.append(f"\nin:  {f.truncate(span.input, 300)}", style="dim")
    if span.output:
        text.append(f"\nout: {f.truncate(span.output, 300)}", style=f.colour(variables, "error") if span.is_error else "dim")
    return text


def reproducer_text(command: str | None) -> Text:
    text = Text()
    if command:
        text.append("Replays exactly this scenario from its seed:\n\n", style="dim")
        text.append(command, style="bold")
        text.append("\n\npress y to copy it to the clipboard", style="dim")
    else:
        text.append("No reproducer yet (it appears once the run has finished).", style="dim")
    return text
