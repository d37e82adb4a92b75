"""Load a spec from YAML text: parse with line numbers, validate, report every issue at once.

Pure and offline: no Docker, no network, no file reads beyond :func:`load_spec_file`'s own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import SpecIssue, SpecValidationError, describe_value, issues_from_validation_error, make_issue
from .models import CROSS_FIELD_ERROR, SpecDocument, cross_field_issues
from .yaml_lines import YamlSyntaxError, parse_yaml_with_lines

__all__ = ["load_spec", "load_spec_file", "validate_spec_data"]

_REQUIRED_HINT = "version, id, base, task and invariants"


def load_spec(text: str, source: str = "spec.yaml") -> SpecDocument:
    """Parse and validate a spec document.

    Raises :class:`SpecValidationError` listing every problem (YAML syntax, duplicate keys, unknown
    keys, wrong types, missing keys, bad references between blocks) with its path and line.
    """
    if not isinstance(text, str):
        raise TypeError(f"load_spec expects the YAML text as str, got {type(text).__name__}")
    try:
        parsed = parse_yaml_with_lines(text)
    except YamlSyntaxError as exc:
        raise SpecValidationError([SpecIssue("", exc.line, exc.msg)], source) from None

    data = parsed.data
    if data is None:
        raise SpecValidationError(
            [SpecIssue("", None, f"the spec is empty: expected a mapping with at least {_REQUIRED_HINT}")],
            source,
        )
    if not isinstance(data, Mapping):
        raise SpecValidationError(
            [SpecIssue("", 1, f"expected a mapping at the top level with {_REQUIRED_HINT}, got {describe_value(data)}")],
            source,
        )

    issues = [make_issue(p.path, p.msg, parsed.lines) for p in parsed.problems]
    try:
        doc = SpecDocument.model_validate(data)
    except ValidationError as exc:
        issues.extend(_validation_issues(exc, data, parsed.lines))
        raise SpecValidationError(issues, source) from None
    if issues:
        raise SpecValidationError(issues, source)
    return doc


def load_spec_file(path: str | Path) -> SpecDocument:
    """Read and load a spec file; issues are reported against its file name."""
    p = Path(path)
    return load_spec(p.read_text(encoding="utf-8"), source=str(path))


def validate_spec_data(data: Any, source: str = "spec") -> SpecDocument:
    """Validate already-parsed data (for example a JSON body) with the same messages as
    :func:`load_spec`, without line numbers."""
    if not isinstance(data, Mapping):
        raise SpecValidationError(
            [SpecIssue("", None, f"expected a mapping with {_REQUIRED_HINT}, got {describe_value(data)}")], source
        )
    try:
        return SpecDocument.model_validate(data)
    except ValidationError as exc:
        raise SpecValidationError(_validation_issues(exc, data, None), source) from None


def _validation_issues(
    exc: ValidationError, data: Mapping[str, Any], lines: Mapping[tuple[Any, ...], int] | None
) -> list[SpecIssue]:
    issues = issues_from_validation_error(
        exc, SpecDocument, data, lines, skip_types=frozenset({CROSS_FIELD_ERROR})
    )
    # References between blocks: the model reports them only once everything else is valid, so
    # they are also checked on the raw data and show up together with the other problems.
    cross: list[tuple[tuple[Any, ...], str]] = []
    for err in exc.errors(include_url=False):
        if err["type"] == CROSS_FIELD_ERROR:
            cross.extend((tuple(loc), msg) for loc, msg in (err.get("ctx") or {}).get("issues", []))
    cross.extend(cross_field_issues(data))
    seen = {(i.loc, i.msg) for i in issues}
    for loc, msg in cross:
        issue = make_issue(loc, msg, lines)
        if (issue.loc, issue.msg) not in seen:
            seen.add((issue.loc, issue.msg))
            issues.append(issue)
    return issues
