"""Helpers every parser uses, and the vocabularies (terminal states, verdicts, audit types)."""
from __future__ import annotations

from typing import Any


TERMINAL_EXPERIMENT = {"completed", "failed", "cancelled", "errored", "complete"}
TERMINAL_RUN = {"passed", "failed", "errored", "cancelled", "pass", "fail", "error"}
VERDICTS = ("pass", "fail", "flaky", "error")
AUDIT_TYPES = ("file_write", "db_write", "http_call", "process_spawn", "stdout", "warning")

_VERDICT_ALIASES = {"passed": "pass", "failed": "fail", "errored": "error", "complete": "completed"}


def pick(data: Any, *paths: str, default: Any = None) -> Any:
    """The first present, non-None value among dotted `paths` ("metrics.pass_rate")."""
    for path in paths:
        node = data
        for part in path.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                node = None
                break
        if node is not None:
            return node
    return default


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


def items(page: Any) -> list[dict]:
    """A list answer, whether it is the `{items, next_cursor, count}` envelope or a bare array."""
    if isinstance(page, list):
        return [x for x in page if isinstance(x, dict)]
    if isinstance(page, dict):
        for key in ("items", "data", "results", "spans", "events"):
            if isinstance(page.get(key), list):
                return [x for x in page[key] if isinstance(x, dict)]
    return []
