"""Vocabularies of the contract the client needs as constants: the terminal states of experiments and
runs, and the verdict words. The result models themselves (RunResults, ScenarioResult, ReplicaRun,
ComparisonResult, ...) are daemon/contract/experiments.py's; client/typed.py returns them.

Spelled out here (not imported) so that importing the client loads nothing of daemon/ (the TUI's
boundary test checks that); tests/tui/test_typed_client.py checks they match the contract."""
from __future__ import annotations

# The final ExperimentStatus values (daemon.contract.experiments.EXPERIMENT_STATUSES) and Run.status
# values: after them an experiment / a run changes no more.
TERMINAL_EXPERIMENT_STATUSES = ("completed", "failed", "cancelled")
TERMINAL_RUN_STATUSES = ("passed", "failed", "errored", "cancelled")
# Run / replica verdicts (Run.verdict, ReplicaRun.verdict) and scenario verdicts (ScenarioResult.verdict).
RUN_VERDICTS = ("pass", "fail", "error")
SCENARIO_VERDICTS = ("pass", "fail", "flaky", "error")
