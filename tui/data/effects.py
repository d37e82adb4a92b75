"""Effects (daemon/effects): a run's ledger as titled sections of rows, the differences between two
runs, and a comparison's effects section as one row per difference. Every string in a row came from
an agent (table names, hosts, paths, commands): the widgets show them as plain Text."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tui.data.common import verdict

if TYPE_CHECKING:
    from daemon.contract.effects import EffectsDiff, RunEffects, ScenarioEffects


def key_text(columns: list[str], keys: list[str], more: bool) -> str:
    """`id=3,4` (`,…` when more rows changed than are listed); empty without a primary key."""
    if not columns or not keys:
        return ""
    name = columns[0] if len(columns) == 1 else "(" + ", ".join(columns) + ")"
    return f"{name}={','.join(keys)}{',…' if more else ''}"


@dataclass
class EffectSection:
    title: str
    recorded: bool  # False: its source was off, so the kind is unknown (never "none")
    why: str  # what was not recorded, when not recorded
    head: tuple[str, ...]
    rows: list[tuple[str, ...]]


@dataclass
class RunLedger:
    run_id: str
    status: str
    window: str  # agent | run
    sections: list[EffectSection]
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(len(s.rows) for s in self.sections)

    @classmethod
    def of(cls, ledger: RunEffects) -> "RunLedger":
        src = ledger.sources
        files: dict[str, list[tuple[str, ...]]] = {where: [(str(f.change), f.path) for f in ledger.files if f.where == where] for where in ("workspace", "container")}
        sections = [
            EffectSection("Database writes", src.db, "audit.db_writes is off",
                          ("table", "operation", "rows", "transactions", "service", "keys"),
                          [(d.table, d.operation, "?" if d.rows is None else str(d.rows), str(d.transactions), d.service,
                            key_text(d.key_columns, d.keys, d.keys_more)) for d in ledger.db]),
            EffectSection("HTTP calls", src.http, "audit.http_calls is off", ("method", "host", "calls", "statuses", "path"),
                          [(h.method, h.host, str(h.calls), " ".join(f"{k}:{v}" for k, v in h.statuses.items()), h.path)
                           for h in ledger.http]),
            EffectSection("Model calls", src.models, "", ("model", "calls", "errors", "tokens in→out", "cost"),
                          [(m.model, str(m.calls), str(m.errors), f"{m.input_tokens:,}→{m.output_tokens:,}",
                            "?" if m.cost_usd is None else f"${m.cost_usd:.4f}") for m in ledger.models]),
            EffectSection("Files in /workspace", src.workspace_files, "the workspace diff around the agent was not recorded",
                          ("change", "path"), files["workspace"]),
            EffectSection("Files outside /workspace", src.container_files, "the container diff around the agent was not recorded",
                          ("change", "path"), files["container"]),
            EffectSection("Processes", src.processes, "audit.process_spawns is off", ("runs", "exit codes", "command"),
                          [(str(p.count), " ".join("?" if c is None else str(c) for c in p.exit_codes), p.command)
                           for p in ledger.processes]),
        ]
        return cls(run_id=ledger.run_id, status=verdict(ledger.status), window=ledger.window, sections=sections,
                   notes=list(ledger.notes))


@dataclass
class RunEffectsDiff:
    """Two runs' effects compared: one message per difference, the kinds not compared."""
    a: str
    b: str
    messages: list[str]
    unknown: list[str]

    @classmethod
    def of(cls, diff: EffectsDiff) -> "RunEffectsDiff":
        return cls(a=diff.a, b=diff.b, messages=[d.message for d in diff.differences], unknown=list(diff.unknown))


SIDE_WORDS = {"between": "between", "baseline": "baseline replicas", "candidate": "candidate replicas"}


@dataclass
class EffectDiffRow:
    """One difference of a comparison's effects section, with the runs it came from."""
    scenario: str  # the matrix entry's label
    side: str  # between | baseline | candidate
    kind: str
    message: str
    baseline_run_id: str | None = None
    candidate_run_id: str | None = None

    @property
    def where(self) -> str:
        return SIDE_WORDS.get(self.side, self.side)


def entry_label(entry: dict[str, Any] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in entry.items()) if entry else "(no matrix)"


def effect_rows(scenarios: list[ScenarioEffects]) -> list[EffectDiffRow]:
    """Per scenario, the differences between the experiments first, then between one side's replicas."""
    rows = []
    for scenario in scenarios:
        label = entry_label(scenario.matrix_entry)
        base = scenario.baseline_runs[0] if scenario.baseline_runs else None
        cand = scenario.candidate_runs[0] if scenario.candidate_runs else None
        for d in sorted(scenario.differences, key=lambda d: d.side != "between"):
            rows.append(EffectDiffRow(label, d.side, d.kind, d.message, base, cand))
    return rows
