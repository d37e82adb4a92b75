"""Python rules: the rule's command runs inside ONE throw-away sandbox of the stock python image per
scoring job (never on the host; no network: a sandbox without a spec denies egress), reads the spans
as JSON lines on stdin and prints one `{span_id, score, passed, reason}` line per span.

Whatever the command does wrong (exit non-zero, time out, print a bad line, skip a span) becomes a
`rule_error` row for the spans concerned, never a score."""
from __future__ import annotations

import json
import math
import shlex
from typing import Any

from daemon.sandbox.services import PYTHON_IMAGE
from daemon.scores.regex_rule import verdict
from daemon.appkeys import SANDBOXES

COMMAND_TIMEOUT_S = 120.0
SANDBOX_TIMEOUT_S = 3600.0
SPANS_FILE = ".svc-score-spans.jsonl"
MAX_REASON_CHARS = 2_000
MAX_ERROR_CHARS = 500


def rule_error(message: str) -> dict[str, Any]:
    return {"score": None, "passed": None, "reason": None, "judge_error": {"code": "rule_error", "message": message[:MAX_ERROR_CHARS]}}


class PythonSandbox:
    """The job's sandbox, created on first use and destroyed by close()."""

    def __init__(self, app: Any, tenant_id: str, job_id: str):
        self.app = app
        self.tenant_id = tenant_id
        self.job_id = job_id
        self.sandbox_id: str | None = None

    async def _sandbox(self) -> str:
        if self.sandbox_id is None:
            booting = await self.app[SANDBOXES].boot(self.tenant_id, image=PYTHON_IMAGE, shape="A", timeout_s=SANDBOX_TIMEOUT_S,
                                                     metadata={"score_job_id": self.job_id})
            self.sandbox_id = booting.id
            booted = await booting.result()
            if booted.sandbox is None:
                raise RuntimeError(f"the scoring sandbox did not boot: {booted.message or booted.state}")
        return self.sandbox_id

    async def score(self, command: str, threshold: float | None, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        try:
            sandbox_id = await self._sandbox()
            manager = self.app[SANDBOXES]
            lines = "".join(json.dumps(span, separators=(",", ":")) + "\n" for span in spans)
            await manager.write_file(sandbox_id, SPANS_FILE, lines.encode())
            result = await manager.exec(sandbox_id, f"( {command}\n) < {shlex.quote(SPANS_FILE)}", timeout_s=COMMAND_TIMEOUT_S,
                                        record=False)
        except Exception as exc:
            return [rule_error(f"the python rule could not run: {exc}") for _ in spans]
        if result.timed_out:
            return [rule_error(f"the command ran past {COMMAND_TIMEOUT_S:g}s and was killed") for _ in spans]
        if result.exit_code != 0:
            tail = result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else []
            return [rule_error(f"the command exited with code {result.exit_code}" + (f": {tail[0]}" if tail else "")) for _ in spans]
        return parse_output(result.stdout, threshold, spans)


def parse_output(stdout: str, threshold: float | None, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result per span, in order, from the command's output lines."""
    wanted = {span["span_id"] for span in spans}
    found: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(stdout.splitlines(), 1):
        if not line.strip():
            continue
        parsed = _parse_line(line, wanted, threshold)
        if isinstance(parsed, str):
            problem = f"output line {number}: {parsed}"
            return [rule_error(problem) for _ in spans]
        span_id, result = parsed
        found.setdefault(span_id, result)
    return [found.get(span["span_id"]) or rule_error(f"no output line for span '{span['span_id']}'") for span in spans]


def _parse_line(line: str, wanted: set[str], threshold: float | None) -> tuple[str, dict[str, Any]] | str:
    try:
        item = json.loads(line)
    except ValueError:
        return "not a JSON object"
    if not isinstance(item, dict):
        return "not a JSON object"
    span_id = item.get("span_id")
    if span_id not in wanted:
        return f"span_id {str(span_id)[:80]!r} is not one of the spans given"
    score = item.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) or not 0 <= score <= 1:
        return "score must be a number between 0 and 1"
    passed = item.get("passed")
    if passed is not None and not isinstance(passed, bool):
        return "passed must be true, false or absent"
    reason = item.get("reason")
    if reason is not None and not isinstance(reason, str):
        return "reason must be a string"
    return span_id, {"score": float(score), "passed": verdict(float(score), threshold) if passed is None else passed,
                     "reason": reason[:MAX_REASON_CHARS] if reason else None, "judge_error": None}
