"""`{{ expected }}` and `{{ expected.KEY.SUBKEY }}` in a check's string parameters, replaced from a
dataset record's `expected` (a string as it is, anything else as JSON). A placeholder naming a key the
record does not have is left as written, so the check fails visibly instead of comparing with ''."""
from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

PLACEHOLDER = re.compile(r"\{\{\s*expected((?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
_MISSING = object()


def _lookup(expected: Any, path: str) -> Any:
    value = expected
    for part in [p for p in path.split(".") if p]:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def render_text(text: str, expected: Any) -> str:
    def sub(match: re.Match) -> str:
        value = _lookup(expected, match.group(1))
        if value is _MISSING:
            return match.group(0)
        return value if isinstance(value, str) else json.dumps(value)

    return PLACEHOLDER.sub(sub, text) if "{{" in text else text


def _render(value: Any, expected: Any) -> Any:
    if isinstance(value, str):
        return render_text(value, expected)
    if isinstance(value, list):
        return [_render(v, expected) for v in value]
    if isinstance(value, dict):
        return {k: _render(v, expected) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return render_expected(value, expected)
    return value


def render_expected(check: BaseModel, expected: Any) -> BaseModel:
    """A copy of `check` whose string parameters (nested ones too) have the placeholders replaced."""
    changes = {}
    for name in type(check).model_fields:
        value = getattr(check, name)
        rendered = _render(value, expected)
        if rendered != value:
            changes[name] = rendered
    return check.model_copy(update=changes) if changes else check
