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


def messages_text(raw: str) -> str:
    """An LLM call's input or output in full: chat messages one per paragraph (`role: content`),
    other JSON indented, plain text as it is."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return raw
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, list) and all(isinstance(m, dict) and "content" in m for m in value):
        parts = []
        for message in value:
            content = message["content"]
            if not isinstance(content, str):
                content = json.dumps(content, indent=1, default=str)
            parts.append(f"{message.get('role', '?')}: {content}")
        return "\n\n".join(parts)
    return json.dumps(value, indent=1, default=str)


FULL_TEXT = 20_000  # characters of an input or output shown in the detail pane (the rest: the trajectory)


def span_detail(span: Span | None, variables: dict, extra: Text | None = None) -> Text:
    """The span's header line, then `extra` (its scores), then its input and output in full."""
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
    if extra is not None:
        text.append_text(extra)
    if span.output:  # first: what it answered is what the pane is opened for (z shows the rest)
        text.append("\nout ", style="bold")
        text.append(messages_text(span.output)[:FULL_TEXT], style=f.colour(variables, "error") if span.is_error else "")
    if span.input:
        text.append("\nin  ", style="bold")
        text.append(messages_text(span.input)[:FULL_TEXT])
    return text


def reproducer_text(command: str | None) -> Text:
    text = Text()
    if command:
        text.append("Replays exactly this scenario from its seed (one line; y copies it):\n\n", style="dim")
        text.append(" ".join(command.split()), style="bold")  # its box never wraps (app.tcss #repro-body)
    else:
        text.append("No reproducer yet (it appears once the run has finished).", style="dim")
    return text


# --- why a run ended as it did ------------------------------------------------------------------------

ERROR_WORDS = {
    "agent_timeout": "the agent ran out of time",
    "budget_exceeded": "the run went over its model budget",
    "boot_failed": "the sandbox did not boot",
    "daemon_restart": "svcd restarted while it ran",
    "replay_diverged": "the agent asked the models something the recording does not hold",
}


def evidence_line(inv: InvariantRow) -> str:
    """What a failed check saw, in one line: its message, else the exit code and output it names."""
    if inv.message:
        return inv.message
    evidence = inv.evidence if isinstance(inv.evidence, dict) else {}
    parts = []
    first = ("exit_code", "expected", "actual", "exists", "missing", "path", "stdout", "stderr", "error")
    present = [k for k in [*first, *(k for k in evidence if k not in first and k != "violations")]
               if evidence.get(k) not in (None, "", [], {})]
    for key in present[:5]:
        value = evidence[key]
        if key == "exit_code":
            parts.append(f"exit {value}")
        else:
            parts.append(f"{key} {f.truncate(value if isinstance(value, str) else json.dumps(value, default=str), 60)}")
    return " · ".join(parts)


def decisive_check(invariants: list[InvariantRow]) -> InvariantRow | None:
    """The failed check that decided the verdict: a failed gate first, else the lowest-scoring failure."""
    failed = [i for i in invariants if i.status in ("fail", "failed", "error") and not i.name.startswith("forbidden.")]
    if not failed:
        return None
    gates = [i for i in failed if i.gate]
    return (gates or sorted(failed, key=lambda i: (i.score if i.score is not None else 0.0) * (i.weight or 1.0)))[0]


def why_text(status: str, info: Any, invariants: list[InvariantRow], violations: list[Violation],
             variables: dict) -> tuple[Text, Text]:
    """(the verdict's reason, the decisive failed check or rule) — the first two lines of the run view."""
    err = f"bold {f.colour(variables, 'error')}"
    headline, decisive = Text(), Text()
    code = getattr(info, "error_code", "") if info else ""
    if code:
        headline.append(code, style=err)
        limit = getattr(info, "agent_timeout_s", None)
        if code == "agent_timeout" and limit:
            headline.append(f" after {limit:g}s", style=err)
        words = info.error_message or ERROR_WORDS.get(code, "")
        step = f" in {info.error_step}" if info.error_step else ""
        headline.append(f"{step}: {words}" if words else step)
    elif violations:
        first = violations[0]
        headline.append(f"forbidden rule {first.rule} violated", style=err)
        if len(violations) > 1:
            headline.append(f" (+{len(violations) - 1} more)")
        decisive.append(f"✗ {first.rule}: ", style=err)
        decisive.append(f"{first.message}  → {f.truncate(event_summary(first.event), 80)}  (v shows it)")
    elif info is not None and getattr(info, "reasons", None):
        headline.append(info.reasons[0], style=err)
        for extra in info.reasons[1:]:
            headline.append(f"; {extra}")
    elif status in ("fail", "error") and info is not None and info.reason:
        headline.append(info.reason, style=err)
    elif status == "pass":
        headline.append(f"passed: all {len(invariants)} check(s) held" if invariants else "passed",
                        style=f.colour(variables, "success"))
    check = decisive_check(invariants) if not code or invariants else None
    if check is not None and not decisive:
        decisive.append(f"✗ {check.name}{' (gate)' if check.gate else ''}", style=err)
        line = evidence_line(check)
        decisive.append(f"  → {f.truncate(line, 120)}" if line else "", style="")
    return headline, decisive


def explaining_tab(info: Any, invariants: list[InvariantRow], violations: list[Violation]) -> str | None:
    """The tab that explains the verdict: Audit for a violated rule, Checks for a failed check or an error."""
    if violations:
        return "audit"
    if (info is not None and getattr(info, "error_code", "")) or decisive_check(invariants) is not None:
        return "checks"
    return None
