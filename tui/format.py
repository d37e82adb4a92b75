"""Small formatting helpers shared by the widgets: numbers, durations, ages, sparklines and the
semantic colours (pass/fail/...) taken from the active theme."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from rich.text import Text

from client.terminal import printable

SPARK = "▁▂▃▄▅▆▇█"
DASH = "–"

# verdict / state -> theme variable holding its colour
TONES = {
    "pass": "success", "passed": "success", "completed": "success", "ready": "success", "ok": "success",
    "better": "success", "connected": "success",
    "fail": "error", "failed": "error", "error": "error", "errored": "error", "worse": "error",
    "flaky": "warning", "running": "accent", "provisioning": "accent", "creating": "accent", "queued": "secondary",
    "created": "secondary", "cancelled": "warning", "stopped": "secondary", "destroyed": "secondary",
    "reconnecting": "warning", "same": "foreground", "skipped": "warning",
}

# fallbacks when no app/theme is around (tests that format outside an app)
_DEFAULT_COLOURS = {"success": "green", "error": "red", "warning": "yellow", "accent": "cyan",
                    "secondary": "blue", "foreground": "default"}


def colour(variables: dict[str, str] | None, tone: str) -> str:
    if variables and variables.get(tone):
        return variables[tone]
    return _DEFAULT_COLOURS.get(tone, "default")


def rate_tone(rate: float | None) -> str:
    """A pass rate's colour: all passed green, none red, some in between amber."""
    if rate is None:
        return "foreground"
    return "success" if rate >= 1 else ("error" if rate <= 0 else "warning")


def outcome_tone(status: str, pass_rate: float | None) -> str:
    """An experiment coloured by how it went, not by where it is in its lifecycle: a completed one
    where nothing passed is red, not green."""
    if status == "completed" and pass_rate is not None:
        return rate_tone(pass_rate)
    return tone_of(status)


def tone_of(word: str | None) -> str:
    return TONES.get((word or "").lower(), "foreground")


def plain(value: object, style: str = "") -> Text:
    """Text that came from an agent, a tenant or a file (tool names, output lines, span names, stream
    messages, experiment names) as data: never parsed as Rich markup, so `copied to [/usr/local/bin]`
    cannot crash a view and `[link=...]`/`[@click=...]` show as typed. Every such string reaches a
    widget through this (or a `Text` built the same way), never as a `str` a widget would parse. Its
    control characters but newline and tab are shown (`\\x1b`), never sent to the terminal."""
    return Text(printable(value), style=style)


def styled(word: str | None, variables: dict[str, str] | None, *, bold: bool = False, text: str | None = None) -> Text:
    """`word` painted in its semantic colour (pass green, fail red, ...)."""
    label = text if text is not None else (word or DASH)
    style = colour(variables, tone_of(word))
    return Text(label, style=f"bold {style}" if bold else style)


def pct(value: float | None, digits: int = 0) -> str:
    return DASH if value is None else f"{value * 100:.{digits}f}%"


def money(value: float | None) -> str:
    if value is None:
        return DASH
    if value == 0:
        return "$0"
    if value < 0.01:
        return f"${value:.4f}"
    return f"${value:.2f}"


def ms(value: float | None) -> str:
    if value is None:
        return DASH
    if value < 1000:
        return f"{value:.0f}ms"
    if value < 60_000:
        return f"{value / 1000:.1f}s"
    minutes, seconds = divmod(value / 1000, 60)
    return f"{int(minutes)}m{int(seconds):02d}s"


def num(value: float | int | None) -> str:
    if value is None:
        return DASH
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return f"{int(value):,}"


def score(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}"


def parse_ts(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def age(value: Any, now: datetime | None = None) -> str:
    """`3s`, `4m`, `2h`, `5d` since an ISO timestamp."""
    when = parse_ts(value)
    if when is None:
        return DASH
    seconds = max(0.0, ((now or datetime.now(timezone.utc)) - when).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def clock(value: Any) -> str:
    """HH:MM:SS of an ISO timestamp (local display of the UTC time)."""
    when = parse_ts(value)
    return when.strftime("%H:%M:%S") if when else DASH


def sparkline(values: list[float | None], width: int = 8) -> str:
    """The last `width` values (0..1) as block characters; gaps for unknown values."""
    tail = values[-width:]
    out = []
    for value in tail:
        if value is None:
            out.append(" ")
        else:
            out.append(SPARK[min(len(SPARK) - 1, max(0, int(round(value * (len(SPARK) - 1)))))])
    return "".join(out)


def progress(done: int | None, total: int | None) -> str:
    if total is None and done is None:
        return DASH
    if total is None:
        return f"{done}"
    return f"{done or 0}/{total}"


def bytes_(value: float | None) -> str:
    if value is None:
        return DASH
    for unit in ("B", "K", "M", "G"):
        if value < 1024 or unit == "G":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return DASH


def truncate(text: str | None, width: int) -> str:
    if not text:
        return ""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
