"""The job engine's kinds are plug-ins: the API and the services ask a group's kind (stored with its
jobs) what to do and how to describe it; none of them tells kinds apart by an id prefix or by
comparing a kind's name."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("daemon/api", "daemon/experiments", "daemon/runner", "daemon/datasets", "daemon/alerts", "daemon/scores")
ID_PREFIX = re.compile(r"""startswith\(\s*["'](rep|exp|run|job|suite|scn)_""")
KIND_NAME = re.compile(r"""kind\s*[!=]=\s*["'](run|suite|experiment)["']""")


def offending_lines() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if ID_PREFIX.search(line) or KIND_NAME.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_no_group_kind_is_detected_by_id_prefix_or_name():
    assert offending_lines() == []
