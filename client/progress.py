"""The progress line of `eval run`, `replicas run --wait|watch` and `watch`: on a terminal one line
on stderr rewritten in place (runs done/total, pass/fail/error so far, elapsed, ETA); otherwise a
plain line each time the counts change, so logs stay readable."""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class ProgressLine:
    def __init__(self, label: str, stream: TextIO | None = None, live: bool | None = None):
        self.label = label
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.started = time.monotonic()
        self.last: tuple | None = None
        self.open = False

    def text(self, done: int, total: int, passed: int, failed: int, errors: int, at_once: str = "") -> str:
        elapsed = time.monotonic() - self.started
        eta = "-" if not done or done >= total else _clock(elapsed / done * (total - done))
        return (f"{self.label}: {done}/{total} runs · pass {passed} · fail {failed} · error {errors}"
                + (f" · {at_once} at once" if at_once else "") + f" · {_clock(elapsed)} elapsed · ETA {eta}")

    def update(self, done: int, total: int, passed: int = 0, failed: int = 0, errors: int = 0, at_once: str = "") -> None:
        """`at_once`: the concurrency the runs go at (the daemon's choice under `concurrency_limit: auto`)."""
        counts = (done, total, passed, failed, errors, at_once)
        if self.live:
            self.stream.write("\r\x1b[2K" + self.text(*counts))
            self.open = True
        elif counts != self.last:
            self.stream.write(self.text(*counts) + "\n")
        self.last = counts
        self.stream.flush()

    def finish(self) -> None:
        """Ends the live line so what follows starts on its own line."""
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False


def at_once(results: dict[str, Any]) -> str:
    """`3`, or `2-4` when the daemon changed it meanwhile: the limits the experiment's runs started under."""
    chosen = (results.get("metrics") or {}).get("concurrency") or {}
    low, high = chosen.get("min"), chosen.get("max")
    if low is None or high is None:
        return ""
    return str(low) if low == high else f"{low}-{high}"


def experiment_counts(results: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """(done, total, passed, failed, errors) over the runs of an experiment's RunResults."""
    scenarios = results.get("scenarios") or []
    passed = sum(s.get("passed_runs") or 0 for s in scenarios)
    failed = sum(s.get("failed_runs") or 0 for s in scenarios)
    errors = sum(s.get("errored_runs") or 0 for s in scenarios)
    return results.get("completed_runs") or 0, results.get("total_runs") or 0, passed, failed, errors
