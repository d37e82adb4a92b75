"""Parsing and checking of alert conditions, windows and destinations; every error names its field."""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

from daemon.errors import InvalidRequest
from daemon.spec.blocks import ALERT_METRICS, ALERT_OPERATORS, parse_alert_condition

MAX_WINDOW_RUNS = 100
MAX_WINDOW_HOURS = 90 * 24
COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
_RUNS = re.compile(r"last_(\d{1,6})_runs")
_PERIOD = re.compile(r"last_(\d{1,6})([mhd])")
_UNIT_HOURS = {"m": 1 / 60, "h": 1.0, "d": 24.0}


@dataclass(frozen=True)
class Window:
    runs: int | None = None  # last N experiments of the spec must all cross
    seconds: float | None = None  # the metric over the experiments finished in this period


def bad(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{field}: {message}", [{"loc": field, "msg": message}])


def parse_condition(text: str, field: str = "condition") -> tuple[str, str, float]:
    """`"pass_rate < 0.8"` -> ("pass_rate", "<", 0.8); 400 naming `field` otherwise."""
    try:
        metric, op, threshold = parse_alert_condition(text)
    except ValueError as exc:
        raise bad(field, f"{exc} (metrics: {', '.join(ALERT_METRICS)}; operators: {' '.join(ALERT_OPERATORS)})")
    if not math.isfinite(threshold):
        raise bad(field, f"the value in '{text}' must be a finite number")
    return metric, op, threshold


def parse_window(text: str | None, field: str = "window") -> Window | None:
    if text is None:
        return None
    runs = _RUNS.fullmatch(text)
    if runs:
        n = int(runs.group(1))
        if not 1 <= n <= MAX_WINDOW_RUNS:
            raise bad(field, f"last_<N>_runs needs 1 <= N <= {MAX_WINDOW_RUNS}, got {n}")
        return Window(runs=n)
    period = _PERIOD.fullmatch(text)
    if period:
        hours = int(period.group(1)) * _UNIT_HOURS[period.group(2)]
        if not 0 < hours <= MAX_WINDOW_HOURS:
            raise bad(field, f"the period must be more than 0 and at most {MAX_WINDOW_HOURS}h (90 days)")
        return Window(seconds=hours * 3600)
    raise bad(field, f"'{text}' is not a window; expected last_<N>_runs (e.g. last_5_runs) or last_<N>h (e.g. last_24h)")


def check_destination(notify: str, webhook_url: str | None, slack_channel: str | None, email_to: str | None,
                      prefix: str = "") -> None:
    """The destination field `notify` needs is present (400 naming it)."""
    needed = {"webhook": ("webhook_url", webhook_url), "chat": ("slack_channel", slack_channel), "email": ("email_to", email_to)}
    name, value = needed[notify]
    if not value:
        raise bad(prefix + name, f"notify: {notify} needs {name}")


def crossed(value: float | None, op: str, threshold: float) -> bool:
    return value is not None and COMPARE[op](value, threshold)
