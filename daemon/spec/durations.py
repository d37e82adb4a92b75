"""Durations (``"90s"``, ``"5m"``, ``"1h30m"``, ``"250ms"``) and byte sizes (``"512m"``, ``"1g"``).

Both parse to plain numbers (seconds as ``float``, bytes as ``int``) and format back to the
shortest string that parses to the same value, so a spec round-trips through JSON unchanged.
"""

from __future__ import annotations

import math
import re

__all__ = ["parse_duration", "format_duration", "parse_size", "format_size"]

_DURATION_UNITS: dict[str, float] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION_HINT = "expected seconds as a number or a string like '90s', '5m', '1h30m', '250ms'"


def parse_duration(value: object) -> float:
    """Return ``value`` as seconds.

    Accepts non-negative ints and floats (seconds), numeric strings (seconds) and strings made of
    ``<number><unit>`` parts with units ``ms``, ``s``, ``m``, ``h``, ``d`` (``"1h30m"``, ``"1.5s"``).
    Raises ``ValueError`` naming the bad value otherwise.
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: {_DURATION_HINT}")
    if isinstance(value, (int, float)):
        seconds = float(value)
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"invalid duration {value!r}: must be a non-negative number of seconds")
        return seconds
    if not isinstance(value, str):
        raise ValueError(f"invalid duration {value!r}: {_DURATION_HINT}")
    text = value.strip().lower().replace(" ", "")
    if not text:
        raise ValueError(f"invalid duration '': {_DURATION_HINT}")
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    pos = 0
    total = 0.0
    seen: list[str] = []
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        unit = match.group(2)
        if unit in seen:
            raise ValueError(f"invalid duration {value!r}: unit '{unit}' appears twice")
        seen.append(unit)
        total += float(match.group(1)) * _DURATION_UNITS[unit]
        pos = match.end()
    if pos != len(text) or not seen:
        raise ValueError(f"invalid duration {value!r}: {_DURATION_HINT}")
    return total


def format_duration(seconds: float) -> str:
    """Format seconds as the shortest duration string: ``300.0 -> "5m"``, ``5400 -> "1h30m"``,
    ``0.25 -> "250ms"``, ``0 -> "0s"``. Precision is one millisecond."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        raise ValueError(f"cannot format duration {seconds!r}")
    if seconds < 0:
        raise ValueError(f"cannot format negative duration {seconds!r}")
    ms = int(round(seconds * 1000))
    if ms == 0:
        return "0s"
    parts: list[str] = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": 1024,
    "m": 1024**2,
    "g": 1024**3,
    "t": 1024**4,
}
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?")
_SIZE_HINT = "expected bytes as an integer or a string like '512m', '1g', '2GiB'"


def parse_size(value: object) -> int:
    """Return ``value`` as bytes. Units are binary, as Docker uses them: ``"1g"`` = 1024**3.

    Accepts non-negative ints (bytes) and strings such as ``"512m"``, ``"1g"``, ``"1.5G"``,
    ``"2GiB"``, ``"100MB"``, ``"4096"``."""
    if isinstance(value, bool):
        raise ValueError(f"invalid size {value!r}: {_SIZE_HINT}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"invalid size {value!r}: must not be negative")
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"invalid size {value!r}: {_SIZE_HINT}")
    match = _SIZE_RE.fullmatch(value.strip().lower())
    if not match:
        raise ValueError(f"invalid size {value!r}: {_SIZE_HINT}")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])


def format_size(num_bytes: int) -> str:
    """Format bytes with the largest binary unit that divides them: ``1073741824 -> "1g"``."""
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int) or num_bytes < 0:
        raise ValueError(f"cannot format size {num_bytes!r}")
    for unit in ("t", "g", "m", "k"):
        size = _SIZE_UNITS[unit]
        if num_bytes and num_bytes % size == 0:
            return f"{num_bytes // size}{unit}"
    return str(num_bytes)
