"""Effects as Text: a run's ledger (the run view's Effects tab) and what differs between two runs
(the run pair view). Table names, hosts, paths and commands came from an agent: they are appended
as plain Text (tui.format.plain), never parsed as markup."""
from __future__ import annotations

from rich.text import Text

from tui import format as f
from tui.data.effects import EffectSection, RunEffectsDiff, RunLedger

CELL = 40  # a column other than the last is cut here (the last one wraps)


def _table(section: EffectSection) -> Text:
    cells = [tuple(f.truncate(c, CELL) if i < len(section.head) - 1 else str(c) for i, c in enumerate(row)) for row in section.rows]
    widths = [max(len(r[i]) for r in [section.head, *cells]) for i in range(len(section.head) - 1)]
    out = Text()
    for n, row in enumerate([section.head, *cells]):
        out.append("  ")
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - len(cell) + 2) if i < len(widths) else ""
            out.append_text(f.plain(cell, "dim" if n == 0 else ""))
            out.append(pad)
        out.append("\n")
    return out


def ledger_text(ledger: RunLedger | None, state: str, variables: dict[str, str] | None) -> Text:
    """The Effects tab: each kind's rows, `none`, or `not recorded` (its source was off: unknown, not
    none). `state` says why there is no ledger: waiting (the run has not finished), loading, or the
    daemon's reason."""
    if ledger is None:
        return f.plain(state, "dim")
    text = Text()
    window = "while the agent ran" if ledger.window == "agent" else "over the whole run (setup and checks included)"
    text.append(f"What run {ledger.run_id} changed {window}: {ledger.total} effect(s)\n", style="bold")
    for section in ledger.sections:
        text.append("\n")
        text.append(section.title, style="bold")
        if not section.recorded:
            text.append(": not recorded", style=f"bold {f.colour(variables, 'warning')}")
            text.append(f" ({section.why}; unknown, not none)\n" if section.why else "\n", style="dim")
        elif not section.rows:
            text.append(": none\n", style="dim")
        else:
            text.append(f" ({len(section.rows)})\n")
            text.append_text(_table(section))
    for note in ledger.notes:
        text.append("\nnote: ", style="dim")
        text.append_text(f.plain(note, "dim"))
    return text


def diff_text(diff: RunEffectsDiff | None, state: str, names: tuple[str, str], variables: dict[str, str] | None) -> Text:
    """What differs between two runs' effects, one line each (the daemon's lines say A and B; `names` says which is which)."""
    text = Text("Effects that differ", style="bold underline")
    text.append("\n")
    if diff is None:
        text.append_text(f.plain(state, "dim"))
        return text
    text.append(f"A = {names[0]}, B = {names[1]}\n", style="dim")
    if not diff.messages:
        text.append("the same effects" + (" (of those both recorded)" if diff.unknown else ""), style="dim")
    for message in diff.messages:
        text.append("  • ")
        text.append_text(f.plain(message, f.colour(variables, "warning")))
        text.append("\n")
    if diff.unknown:
        text.append(f"\nnot compared (not recorded in both runs): {', '.join(diff.unknown)}", style="dim")
    return text
