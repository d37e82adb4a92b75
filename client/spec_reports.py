"""The last `svc spec check` of each spec, kept beside the client's state: written by the command,
read by the TUI's launch screen (which shows it in one line)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def report_path(home: Path, spec_id: str) -> Path:
    return Path(home) / "spec-checks" / f"{spec_id}.json"


def save_report(home: Path, report: dict[str, Any]) -> None:
    """The last check of each spec, kept beside the client's state for the TUI's launch screen."""
    import json

    path = report_path(home, report["spec_id"])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**report, "checked_at": time.time()}))
    except OSError:
        pass  # the report was printed; only the TUI's line is missing


def last_report(home: Path, spec_id: str) -> dict[str, Any] | None:
    import json

    try:
        report = json.loads(report_path(home, spec_id).read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and isinstance(report.get("checks"), list) else None


def one_line(report: dict[str, Any]) -> str:
    """The result in a line (the TUI's launch screen, eval's progress)."""
    bad = [f"{c['check']} {c['verdict']}" for c in report["checks"] if c["verdict"] != "ok"]
    n = report["runs"]
    if report["ok"]:
        return f"spec check ok: {len(report['checks'])} check(s), {n.get('oracle', 0)} oracle + {n.get('noop', 0)} noop runs"
    return "spec check failed: " + (", ".join(bad) or "no oracle run finished")
