"""Offline checks of a spec file beyond its schema, for `svc spec validate` and MCP `svc_spec_validate`:
a `{{ name }}` placeholder in `task.prompt` that neither `task.inputs` nor a matrix entry fills (the
run would hand the agent the literal text; daemon/runner/scenario.py's `render_prompt` fills the
prompt from task.inputs, the run's inputs and its matrix entry). A spec over a dataset is not
checked: its records' inputs fill placeholders and are not known offline.

Every problem is `{loc, line, column, msg}`: the YAML path, 1-based line and column, for editors'
problem matchers."""
from __future__ import annotations

import re
from typing import Any

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def unfilled_placeholders(doc: Any) -> list[dict[str, Any]]:
    """({name, entries}) for each prompt placeholder some scenario leaves unfilled: `entries` the
    0-based matrix entries that lack it (empty: the spec has no matrix)."""
    if doc.parallelism.dataset is not None:
        return []
    found: list[dict[str, Any]] = []
    inputs = doc.task.inputs or {}
    matrix = [dict(entry) for entry in doc.parallelism.matrix]
    for name in dict.fromkeys(PLACEHOLDER.findall(doc.task.prompt)):
        if name in inputs:
            continue
        missing = [i for i, entry in enumerate(matrix) if name not in entry] if matrix else []
        if matrix and not missing:
            continue
        found.append({"name": name, "entries": missing if len(missing) < len(matrix) else []})
    return found


def column_of(text: str, line: int | None, needle: str | None = None) -> int | None:
    """1-based column of `needle` on `line` (else of the line's first non-blank character)."""
    if line is None:
        return None
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return None
    row = lines[line - 1]
    if needle and needle in row:
        return row.index(needle) + 1
    return len(row) - len(row.lstrip()) + 1


def placeholder_issues(doc: Any, text: str) -> list[dict[str, Any]]:
    """`unfilled_placeholders` as problems at `task.prompt`'s line (the placeholder's own line in a
    block scalar when it can be found)."""
    from daemon.spec.yaml_lines import parse_yaml_with_lines

    lines = parse_yaml_with_lines(text).lines
    prompt_line = lines.get(("task", "prompt"))
    issues = []
    for item in unfilled_placeholders(doc):
        name, entries = item["name"], item["entries"]
        line = prompt_line
        pattern = re.compile(r"\{\{\s*" + re.escape(name) + r"\s*\}\}")
        if prompt_line is not None:  # a multi-line prompt: the line that holds the placeholder
            for number, row in enumerate(text.splitlines()[prompt_line - 1:], start=prompt_line):
                if pattern.search(row):
                    line = number
                    break
        match = pattern.search(text.splitlines()[line - 1]) if line else None
        where = (f"matrix entr{'y' if len(entries) == 1 else 'ies'} {', '.join(str(i) for i in entries)}"
                 if entries else "task.inputs or any matrix entry")
        issues.append({"loc": "task.prompt", "line": line,
                       "column": match.start() + 1 if match else column_of(text, line),
                       "msg": f"{{{{ {name} }}}} is not filled by {where}: the agent would get the literal text"
                              f" (add {name} to task.inputs or to every parallelism.matrix entry)"})
    return issues
