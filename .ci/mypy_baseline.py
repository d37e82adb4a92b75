"""`make typecheck`: mypy over daemon, client and tui ([tool.mypy] in pyproject.toml), held to the
committed baseline `.ci/mypy-baseline.txt`, which only shrinks.

An error not in the baseline fails (it is new). An error of the baseline that is gone fails too,
until `make typecheck-baseline` rewrites the file without it, so the count in the repository is
the real one. Lines are compared without their line numbers (an edit above an error moves it).

    python .ci/mypy_baseline.py            check
    python .ci/mypy_baseline.py --update   rewrite the baseline; refused while there are new errors
"""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / ".ci" / "mypy-baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<message>.*)$")


def current_errors() -> tuple[Counter[str], str]:
    mypy = Path(sys.executable).with_name("mypy")
    done = subprocess.run([str(mypy)], cwd=ROOT, capture_output=True, text=True)
    errors: Counter[str] = Counter()
    for line in done.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            message = re.sub(r"\bon line \d+", "on line N", match["message"])
            errors[f"{match['path']}: {message}"] += 1
    if done.returncode not in (0, 1) or (done.returncode == 1 and not errors):
        raise SystemExit(f"mypy failed to run:\n{done.stdout}{done.stderr}")
    return errors, done.stdout


def baseline() -> Counter[str]:
    if not BASELINE.exists():
        return Counter()
    return Counter(line for line in BASELINE.read_text().splitlines() if line and not line.startswith("#"))


def main(argv: list[str]) -> int:
    errors, output = current_errors()
    known = baseline()
    new, fixed = errors - known, known - errors
    if new and not ("--update" in argv and not BASELINE.exists()):  # the first baseline takes what there is
        print(output, end="")
        print(f"\n{sum(new.values())} mypy error(s) not in {BASELINE.relative_to(ROOT)}:", file=sys.stderr)
        for line in sorted(new.elements()):
            print(f"  {line}", file=sys.stderr)
        return 1
    if "--update" in argv:
        lines = sorted(errors.elements())
        BASELINE.write_text("# mypy errors left to fix (make typecheck-baseline rewrites this; it only shrinks)\n"
                            + "".join(f"{line}\n" for line in lines))
        print(f"baseline: {len(lines)} error(s)")
        return 0
    if fixed:
        print(f"{sum(fixed.values())} error(s) of the baseline are fixed: run `make typecheck-baseline` so it shrinks:",
              file=sys.stderr)
        for line in sorted(fixed.elements()):
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"mypy: no new errors ({sum(errors.values())} left in the baseline)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
