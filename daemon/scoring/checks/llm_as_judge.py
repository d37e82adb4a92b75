"""``llm_as_judge {rubric, model?, threshold (0.5), inputs: [workspace paths]}``.

Judges the rubric, the task and the named workspace files (the agent's output and the files it
changed when ``inputs`` is empty) through the one judge client (``daemon/judges/client.py``:
``SERVICE_JUDGE_BASE_URL``, ``SERVICE_JUDGE_API_KEY`` or the tenant secret of that name,
``SERVICE_JUDGE_MODEL``, structured output, retries). ``score >= threshold`` passes and the score
is the invariant's graded score.

A judge failure (not configured, network error, timeout, 429, 5xx, unparsable answer, refusal) is
not a score: the invariant is ``skipped`` with ``evidence.judge_error {code, message}`` and the
scenario verdict becomes ``error``. Runs are not cached: a replay asks the judge again."""
from __future__ import annotations

from typing import Any

from daemon.judges.client import JudgeFailure, judge, system_prompt
from daemon.scoring.checks.context import CheckContext, CheckOutcome, JudgeConfig, outcome

FILE_LIMIT = 20_000
TOTAL_LIMIT = 100_000


async def gather_inputs(check, ctx: CheckContext) -> tuple[list[str], list[str]]:
    """(prompt sections, paths used)."""
    sections: list[str] = []
    paths = list(check.inputs) or ctx.changed_files[:10]
    used = []
    total = 0
    for path in paths:
        data = await ctx.read_file(path, FILE_LIMIT + 1)
        if data is None:
            sections.append(f"=== {path} ===\n(missing)")
            continue
        text = data[:FILE_LIMIT].decode("utf-8", "replace") + ("\n…(truncated)" if len(data) > FILE_LIMIT else "")
        total += len(text)
        if total > TOTAL_LIMIT:
            sections.append(f"=== {path} ===\n(left out: the prompt is full)")
            continue
        sections.append(f"=== {path} ===\n{ctx.redact(text)}")
        used.append(path)
    if not check.inputs and ctx.agent_output:
        sections.append("=== agent output (tail) ===\n" + ctx.tail(ctx.agent_output, 8000))
    return sections, used


async def evaluate(check, ctx: CheckContext) -> CheckOutcome:
    config = ctx.judge or JudgeConfig.from_env()
    model = check.model or config.model or "default"
    sections, used = await gather_inputs(check, ctx)
    user = (
        f"Rubric:\n{check.rubric}\n\nTask given to the agent:\n{ctx.redact(ctx.task_prompt)}\n\n"
        "The agent's work:\n" + ("\n\n".join(sections) if sections else "(no files)")
    )
    messages = [{"role": "system", "content": system_prompt("score")}, {"role": "user", "content": user}]
    evidence: dict[str, Any] = {"model": model, "threshold": check.threshold, "inputs": used}
    try:
        reply = await judge(config, model, messages)
    except JudgeFailure as exc:
        return outcome("skipped", {**evidence, "judge_error": exc.as_dict()})
    evidence.update({"score": reply.score, "reason": ctx.redact(reply.reason)})
    return outcome("passed" if reply.score >= check.threshold else "failed", evidence, reply.score)
