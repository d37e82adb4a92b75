"""Golden files: a test compares what it produced with a checked-in file. A missing golden FAILS
the test; goldens are only (re)written on purpose, with SVC_UPDATE_GOLDENS=1 in the environment
(then review the diff before committing)."""
from __future__ import annotations

import difflib
import os
from pathlib import Path

UPDATE_ENV = "SVC_UPDATE_GOLDENS"


def updating() -> bool:
    return os.environ.get(UPDATE_ENV) == "1"


def assert_golden(golden: Path, actual: str, what: str = "") -> None:
    """`actual` must equal the content of `golden`. With SVC_UPDATE_GOLDENS=1 the golden is
    written first (so the assertion holds) — never silently otherwise."""
    label = what or golden.name
    if updating():
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual)
    if not golden.exists():
        raise AssertionError(
            f"{label}: golden file {golden} is missing. Create it on purpose with "
            f"{UPDATE_ENV}=1 .venv/bin/python -m pytest <this test>, review it, and commit it."
        )
    expected = golden.read_text()
    if actual != expected:
        diff = "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(), "golden", "now", lineterm=""))
        raise AssertionError(f"{label} differs from {golden.name} (rewrite on purpose with {UPDATE_ENV}=1):\n{diff}")
