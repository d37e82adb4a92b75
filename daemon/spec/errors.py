"""Spec validation errors: :class:`SpecIssue`, :class:`SpecValidationError`, and the translation of
pydantic's errors into messages that read like the YAML the user wrote."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

__all__ = ["SpecIssue", "SpecValidationError", "issues_from_validation_error", "describe_value"]


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec: dotted path (``services.1.image``), 1-based line (when known) and a
    human message."""

    loc: str
    line: int | None
    msg: str

    def format(self, source: str = "spec.yaml") -> str:
        where = f"{source}:{self.line}" if self.line is not None else source
        return f"{where} {self.loc}: {self.msg}" if self.loc else f"{where}: {self.msg}"

    def as_dict(self) -> dict[str, Any]:
        return {"loc": self.loc, "line": self.line, "msg": self.msg}


class SpecValidationError(ValueError):
    """A spec failed to parse or validate. ``issues`` lists every problem, sorted by line."""

    def __init__(self, issues: Sequence[SpecIssue], source: str = "spec.yaml") -> None:
        self.source = source
        self.issues: list[SpecIssue] = sorted(
            issues, key=lambda i: (i.line is None, i.line or 0, i.loc, i.msg)
        )
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(issue.format(self.source) for issue in self.issues)

    def details(self) -> dict[str, Any]:
        """The ``details`` object of a 400 ``invalid_request`` error body."""
        return {"errors": [issue.as_dict() for issue in self.issues]}


# --- describing values ---------------------------------------------------------------------------


def describe_value(value: Any) -> str:
    """How a YAML value reads in a message: ``'abc'``, ``42``, ``true``, ``null``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return "'" + text.replace("'", "\\'") + "'"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


# --- walking pydantic locations alongside the model types and the raw data -----------------------

_MISSING = object()


def _strip(tp: Any) -> Any:
    """Remove ``Annotated`` and ``Optional`` wrappers; leave real unions alone."""
    while True:
        origin = get_origin(tp)
        if origin is typing.Annotated:
            tp = get_args(tp)[0]
            continue
        if origin in (Union, types.UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp


def _union_tags(tp: Any) -> dict[str, Any] | None:
    """For a tagged union, map each tag to its member type."""
    if get_origin(tp) not in (Union, types.UnionType):
        return None
    tags: dict[str, Any] = {}
    for member in get_args(tp):
        if member is type(None):
            continue
        if get_origin(member) is typing.Annotated:
            inner, *meta = get_args(member)
            for m in meta:
                tag = getattr(m, "tag", None)
                if isinstance(tag, str):
                    tags[tag] = inner
            member = inner
        if isinstance(member, type) and issubclass(member, BaseModel):
            field = member.model_fields.get("type")
            if field is not None and get_origin(field.annotation) is typing.Literal:
                for value in get_args(field.annotation):
                    tags[str(value)] = member
    return tags


def _field_annotation(field: FieldInfo) -> Any:
    return field.annotation


def _model_field(model: type[BaseModel], key: Any) -> FieldInfo | None:
    for name, field in model.model_fields.items():
        if key == name or key == field.alias:
            return field
    return None


def allowed_keys(model: type[BaseModel]) -> list[str]:
    """Keys a user may write in ``model`` (aliases, minus a fixed ``type`` tag)."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        if name == "type" and get_origin(field.annotation) is typing.Literal and len(get_args(field.annotation)) == 1:
            continue
        keys.append(field.alias or name)
    return keys


_UNION_NOUNS = {
    "Check": "check",
    "Service": "service",
    "Agent": "agent",
    "Export": "export",
    "Rule": "score rule",
}


def _union_noun(tags: Mapping[str, Any]) -> str:
    for member in tags.values():
        name = getattr(member, "__name__", "")
        for suffix, noun in _UNION_NOUNS.items():
            if name.endswith(suffix):
                return noun
    return "value"


@dataclass
class _Walk:
    loc: list[Any]
    owner: type[BaseModel] | None  # the model the last key was looked up in
    tags: dict[str, Any] | None  # the tagged union the walk ended on, if any
    key_error: bool  # the error is about a mapping key, not its value


def _walk(root: type[BaseModel], loc: Sequence[Any], data: Any) -> _Walk:
    tp: Any = root
    out: list[Any] = []
    owner: type[BaseModel] | None = None
    key_error = False
    current: Any = data
    for element in loc:
        if element == "[key]":
            key_error = True
            continue
        tp = _strip(tp) if tp is not None else None
        tags = _union_tags(tp) if tp is not None else None
        if tags is not None and isinstance(element, str) and element in tags:
            tp = tags[element]  # pydantic's union tag: not part of the YAML path
            continue
        # the raw data says where the YAML path ends (shorthand values are expanded by validators)
        if current is not _MISSING and not isinstance(current, (Mapping, list)):
            break
        if isinstance(current, Mapping):
            current = current.get(element, _MISSING)
        elif isinstance(current, list):
            current = current[element] if isinstance(element, int) and 0 <= element < len(current) else _MISSING
        out.append(element)
        if tp is None:
            continue
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = _model_field(tp, element)
            owner = tp
            tp = _field_annotation(field) if field is not None else None
        elif get_origin(tp) is list and isinstance(element, int):
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            tp = None
    end = _strip(tp) if tp is not None else None
    return _Walk(out, owner, _union_tags(end) if end is not None else None, key_error)


# --- messages ------------------------------------------------------------------------------------

_TYPE_WORDS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "datetime_type": "a date-time",
    "datetime_parsing": "a date-time",
    "datetime_from_date_parsing": "a date-time",
}


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _tag_list(ctx_value: str) -> list[str]:
    return [t.strip().strip("'\"") for t in ctx_value.split(",") if t.strip()]


def _message(err: Mapping[str, Any], walk: _Walk) -> tuple[list[Any], str]:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    loc = list(walk.loc)
    if kind == "missing":
        if not loc:
            return loc, "missing required key"
        if loc[-1] == "image" and walk.owner is not None and walk.owner.__name__ == "GenericService":
            return loc, (
                "missing required key 'image' (a service without a type is generic and needs an image; "
                "or set type: postgres, redis or http_mock)"
            )
        return loc, f"missing required key '{loc[-1]}'"
    if kind == "extra_forbidden":
        key = loc[-1] if loc else "?"
        if walk.owner is not None:
            return loc, f"unknown key '{key}' (expected one of: {', '.join(allowed_keys(walk.owner))})"
        return loc, f"unknown key '{key}'"
    if kind == "union_tag_invalid":
        tags = _tag_list(ctx.get("expected_tags", ""))
        noun = _union_noun(walk.tags or {})
        return loc + ["type"], f"unknown {noun} type {describe_value(ctx.get('tag'))} (expected one of {', '.join(tags)})"
    if kind == "union_tag_not_found":
        tags = list(walk.tags or {})
        hint = f" (expected one of {', '.join(tags)})" if tags else ""
        return loc + ["type"], f"missing required key 'type'{hint}"
    if kind in ("value_error", "assertion_error"):
        error = ctx.get("error")
        text = str(error) if error is not None else err["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            if text.startswith(prefix):
                text = text[len(prefix):]
        return loc, text
    if kind in _TYPE_WORDS:
        return loc, f"expected {_TYPE_WORDS[kind]}, got {describe_value(value)}"
    if kind == "literal_error":
        options = _tag_list(ctx.get("expected", "").replace(" or ", ","))
        if len(options) == 1:
            return loc, f"expected '{options[0]}', got {describe_value(value)}"
        return loc, f"expected one of {', '.join(options)}, got {describe_value(value)}"
    if kind == "greater_than":
        return loc, f"must be greater than {_num(ctx.get('gt'))}, got {describe_value(value)}"
    if kind == "greater_than_equal":
        return loc, f"must be at least {_num(ctx.get('ge'))}, got {describe_value(value)}"
    if kind == "less_than":
        return loc, f"must be less than {_num(ctx.get('lt'))}, got {describe_value(value)}"
    if kind == "less_than_equal":
        return loc, f"must be at most {_num(ctx.get('le'))}, got {describe_value(value)}"
    if kind == "too_short":
        minimum = ctx.get("min_length", 1)
        return loc, "must not be empty" if minimum == 1 else f"needs at least {minimum} items"
    if kind == "too_long":
        return loc, f"must have at most {ctx.get('max_length')} items"
    if kind == "string_too_short":
        return loc, "must not be empty"
    return loc, str(err.get("msg", "invalid value"))


def issues_from_validation_error(
    exc: ValidationError,
    root: type[BaseModel],
    data: Any,
    lines: Mapping[tuple[Any, ...], int] | None = None,
    skip_types: frozenset[str] = frozenset(),
) -> list[SpecIssue]:
    """Translate a pydantic ``ValidationError`` raised while validating ``data`` as ``root``.

    ``lines`` maps YAML path tuples to line numbers; each issue gets the line of its nearest
    recorded ancestor. Errors whose type is in ``skip_types`` are left out.
    """
    from .blocks import parse_secret_source  # local: blocks imports nothing from here

    issues: list[SpecIssue] = []
    seen: set[tuple[str, str]] = set()
    for err in exc.errors(include_url=False):
        if err["type"] in skip_types:
            continue
        walk = _walk(root, err["loc"], data)
        loc, msg = _message(err, walk)
        if (
            loc[:1] == ["secrets"]
            and len(loc) == 2
            and not walk.key_error
            and err["type"] == "value_error"
            and isinstance(err.get("input"), str)
        ):
            try:
                parse_secret_source(err["input"], name=str(loc[1]))
            except ValueError as named:
                msg = str(named)
        issues.append(make_issue(loc, msg, lines))
    unique: list[SpecIssue] = []
    for issue in issues:
        if (issue.loc, issue.msg) not in seen:
            seen.add((issue.loc, issue.msg))
            unique.append(issue)
    return unique


def line_for(loc: Sequence[Any], lines: Mapping[tuple[Any, ...], int] | None) -> int | None:
    if not lines:
        return None
    path = tuple(loc)
    while True:
        if path in lines:
            return lines[path]
        if not path:
            return None
        path = path[:-1]


def make_issue(loc: Sequence[Any], msg: str, lines: Mapping[tuple[Any, ...], int] | None) -> SpecIssue:
    return SpecIssue(".".join(str(p) for p in loc), line_for(loc, lines), msg)
