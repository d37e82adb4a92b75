"""Helpers every parser uses, and the vocabularies (terminal states, verdicts, audit types)."""
from __future__ import annotations

from typing import Any

from client.results import RUN_VERDICTS, SCENARIO_VERDICTS, TERMINAL_EXPERIMENT_STATUSES, TERMINAL_RUN_STATUSES


# Terminal states come from the contract's vocabularies (client/results.py); a run's status is shown
# as its verdict (pass, fail, error), so both spellings end a run.
TERMINAL_EXPERIMENT = frozenset(TERMINAL_EXPERIMENT_STATUSES)
TERMINAL_RUN = frozenset((*TERMINAL_RUN_STATUSES, *RUN_VERDICTS))
VERDICTS = SCENARIO_VERDICTS
AUDIT_TYPES = ("file_write", "db_write", "http_call", "process_spawn", "stdout", "warning")

_VERDICT_ALIASES = {"passed": "pass", "failed": "fail", "errored": "error", "complete": "completed"}


def as_float(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def as_int(value: Any) -> int | None:
    number = as_float(value)
    return None if number is None else int(number)


def verdict(value: Any) -> str:
    word = str(value or "").lower()
    return _VERDICT_ALIASES.get(word, word)
