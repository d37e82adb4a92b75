"""Text bound for the user's terminal: what agents and tenants wrote (trace names, build output,
check evidence, error messages) reaches it as data. Control characters (ESC sequences that move
the cursor, clear a line or repaint a FAIL as PASS, BEL, backspace, carriage return, C1 codes) are
shown visibly as ``\\x1b`` and the like; newlines and tabs stay. Every line the CLI writes to a
terminal goes through :func:`printable` (``say`` in client/cli.py and client/commands/eval.py)."""
from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: object) -> str:
    """`text` with every control character but newline and tab made visible (``\\x1b``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", str(text))
