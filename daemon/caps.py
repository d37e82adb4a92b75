"""Operator caps on what a spec may ask for (Settings.max_memory, max_disk, max_pids, max_cpus,
max_timeout_s): a spec over one is a 400 in the spec-error shape, one issue per field naming its
path (`resources.memory`), the value asked and the cap. Checked when a spec is uploaded and again
whenever a stored one is used (an operator may have lowered a cap since)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from daemon.config import Settings
from daemon.errors import InvalidRequest
from daemon.spec.durations import format_duration, format_size


def _timeouts(node: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], float]]:
    """Every `timeout` of the document (resources, agent, checks, services' waits ...) with its path."""
    found: list[tuple[tuple[Any, ...], float]] = []
    if isinstance(node, BaseModel):
        for name in type(node).model_fields:
            value = getattr(node, name, None)
            if name == "timeout" and isinstance(value, (int, float)) and not isinstance(value, bool):
                found.append((path + (name,), float(value)))
            elif isinstance(value, (BaseModel, list, tuple, dict)):
                found += _timeouts(value, path + (name,))
    elif isinstance(node, (list, tuple)):
        for index, item in enumerate(node):
            found += _timeouts(item, path + (index,))
    elif isinstance(node, dict):
        for key, item in node.items():
            found += _timeouts(item, path + (key,))
    return found


def cap_issues(doc: Any, settings: Settings) -> list[tuple[tuple[Any, ...], str]]:
    """(path, message) for every value of `doc` over an operator cap."""
    issues: list[tuple[tuple[Any, ...], str]] = []
    res = doc.resources

    def over(field: str, asked: Any, cap: Any, shown_asked: str, shown_cap: str, env: str) -> None:
        if asked is not None and asked > cap:
            issues.append((("resources", field), f"asks for {shown_asked}, over this daemon's cap of {shown_cap} ({env})"))

    if res.memory is not None:
        over("memory", res.memory, settings.max_memory, format_size(res.memory), format_size(settings.max_memory), "SERVICE_MAX_MEMORY")
    if res.disk is not None:
        over("disk", res.disk, settings.max_disk, format_size(res.disk), format_size(settings.max_disk), "SERVICE_MAX_DISK")
    if res.pids is not None:
        over("pids", res.pids, settings.max_pids, str(res.pids), str(settings.max_pids), "SERVICE_MAX_PIDS")
    if res.cpus is not None:
        over("cpus", res.cpus, settings.max_cpus, f"{res.cpus:g}", f"{settings.max_cpus:g}", "SERVICE_MAX_CPUS")
    for path, seconds in _timeouts(doc, ()):
        if seconds > settings.max_timeout_s:
            issues.append((path, f"asks for {format_duration(seconds)}, over this daemon's cap of "
                                 f"{format_duration(settings.max_timeout_s)} (SERVICE_MAX_TIMEOUT)"))
    return issues


def check_caps(doc: Any, settings: Settings, text: str | None = None) -> None:
    """400 invalid_request (the spec-error body: details.errors [{loc, line, msg}]) when `doc` asks
    for more than a cap; `text` (the YAML) gives the issues their lines."""
    issues = cap_issues(doc, settings)
    if not issues:
        return
    from daemon.spec.errors import make_issue
    from daemon.spec.yaml_lines import parse_yaml_with_lines

    lines: Any = None
    if text is not None:
        try:
            lines = parse_yaml_with_lines(text).lines
        except Exception:
            lines = None
    rows = [make_issue(path, msg, lines).as_dict() for path, msg in issues]
    first = rows[0]
    raise InvalidRequest(f"spec is invalid: {first['loc']}: {first['msg']}"
                         + (f" (and {len(rows) - 1} more)" if len(rows) > 1 else ""), rows)
