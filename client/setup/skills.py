"""The instructions file that teaches an editor agent to run svc evals and read their results."""
from __future__ import annotations

import re
from pathlib import Path

from client.setup.plan import Change, read_text

BODY = """\
# Running and reading svc evaluations

svc runs this project's agent in throw-away sandboxes and scores what it did. Use it to check a change.

- Run the evaluation: `svc eval run svc.yaml` (RunResults JSON on stdout; exit 1 when a scenario did
  not pass). Add `--replicas 5` to measure flakiness, `--seed S` to reproduce a run.
- Read results: `svc eval get <experiment-id>`, `svc logs scenarios --experiment <id> --status failed`,
  `svc logs traces <id> --event-type tool_call`, `svc logs trace <trace-id>`, `svc logs scores --experiment <id>`.
- Compare with a baseline before claiming an improvement: `svc eval compare <baseline> <candidate> --gate`.
- A failing scenario carries a `reproducer.command`; run it to replay the failure from its seed.
- The same tools are available over MCP (`svc mcp serve`): svc_eval_run, svc_eval_get, svc_logs_scenarios, ...
- Never print or commit API keys; svc reads them from `SERVICE_API_KEY`, `.env` or `svc login`.
"""

BEGIN, END = "<!-- svc:begin (managed by svc setup) -->", "<!-- svc:end -->"
DESCRIPTION = "Run svc agent evaluations and read their results, traces and scores"


def skill_path(agent: str, project: Path) -> Path:
    return {
        "claude": project / ".claude" / "skills" / "svc-evals" / "SKILL.md",
        "cursor": project / ".cursor" / "rules" / "svc-evals.mdc",
        "vscode": project / ".github" / "instructions" / "svc-evals.instructions.md",
        "codex": project / "AGENTS.md",
        "gemini": project / "GEMINI.md",
    }[agent]


def _whole_file(agent: str) -> str:
    if agent == "claude":
        return f"---\nname: svc-evals\ndescription: {DESCRIPTION}\n---\n\n{BODY}"
    if agent == "cursor":
        return f"---\ndescription: {DESCRIPTION}\nalwaysApply: false\n---\n\n{BODY}"
    return f"---\napplyTo: \"**\"\n---\n\n{BODY}"


def _managed_block(before: str | None) -> str:
    """AGENTS.md / GEMINI.md are the user's own files: only the marked block is ours."""
    block = f"{BEGIN}\n{BODY}{END}\n"
    if not before:
        return block
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", re.S)
    if pattern.search(before):
        return pattern.sub(lambda _: block, before, count=1)
    return before + ("\n" if before.endswith("\n") else "\n\n") + block


def plan(agent: str, project: Path) -> list[Change]:
    path = skill_path(agent, project)
    before = read_text(path)
    after = _managed_block(before) if agent in ("codex", "gemini") else _whole_file(agent)
    return [] if after == before else [Change(path, before, after)]
