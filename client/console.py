"""What every command prints and raises: data as JSON on stdout (`emit`), messages on stderr (`say`),
and `CliError`, a user mistake shown as one line (exit 1). Commands import these from here, never
from the CLI that dispatches them."""
from __future__ import annotations

import json
import sys
from typing import Any

from client.terminal import printable


class CliError(Exception):
    """A user mistake: printed as one line on stderr, exit code 1."""


def emit(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
    sys.stdout.flush()


def say(message: str) -> None:
    """A message line on stderr; what agents wrote in it cannot drive the terminal (client.terminal)."""
    print(printable(message), file=sys.stderr, flush=True)
