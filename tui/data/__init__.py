"""The typed layer between the HTTP API and the widgets.

Every field name the TUI reads from an API answer is read in this package, once, so a renamed field
is fixed in one place: rows are built from the typed contract models (daemon/contract, returned by
client/typed.py), read by attribute. Import from `tui.data`.
"""
from tui.data.audit import (AuditRow, DiffEntry, agent_output_rows, audit_summary, diff_entries, event_summary, violated_index,
                            violation_target)
from tui.data.effects import EffectDiffRow, EffectSection, RunEffectsDiff, RunLedger, effect_rows
from tui.data.common import (AUDIT_TYPES, TERMINAL_EXPERIMENT, TERMINAL_RUN, VERDICTS, as_float, as_int, verdict)
from tui.data.experiments import (CompareMetric, Comparison, ExperimentDetail, ExperimentRow, HistoryPoint,
                                  MetricsSummary, VerdictChange, history_points, verdict_changes)
from tui.data.sandboxes import SandboxRow, SpecIssueRow, spec_issues
from tui.data.scenarios import InvariantRow, RunInfo, ScenarioRow, Violation, invariant_rows, scenario_rows
from tui.data.streams import RunStreamEvent
from tui.data.traces import Span, TraceItem, event_key, event_time, trace_events

__all__ = [
    "EffectDiffRow", "EffectSection", "RunEffectsDiff", "RunLedger", "effect_rows",
    "AUDIT_TYPES", "TERMINAL_EXPERIMENT", "agent_output_rows", "TERMINAL_RUN", "VERDICTS", "AuditRow", "CompareMetric", "Comparison",
    "DiffEntry", "ExperimentDetail", "ExperimentRow", "HistoryPoint", "InvariantRow", "MetricsSummary", "RunInfo", "RunStreamEvent",
    "SandboxRow", "ScenarioRow", "Span", "SpecIssueRow", "TraceItem", "VerdictChange", "Violation", "as_float", "as_int", "audit_summary",
    "diff_entries", "event_key", "event_summary", "event_time", "history_points", "invariant_rows", "scenario_rows",
    "spec_issues", "trace_events", "verdict", "verdict_changes", "violated_index", "violation_target",
]
