"""``llm_as_judge {rubric, model?, threshold (0.5), inputs: [workspace paths]}``.

Calls an OpenAI-compatible chat completions endpoint configured on the daemon
(``SERVICE_JUDGE_BASE_URL``, ``SERVICE_JUDGE_API_KEY`` or the tenant secret of that name,
``SERVICE_JUDGE_MODEL``) with the rubric, the task and the named workspace files (the agent's
output and the files it changed when ``inputs`` is empty). The model answers
``{"score": 0..1, "reason": ...}``; ``score >= threshold`` passes and the score is the invariant's
graded score.

A judge infrastructure failure (not configured, network error, timeout, 429, 5xx, malformed
answer) is not a score: the invariant is ``skipped`` with ``evidence.judge_error`` and the scenario
verdict becomes ``error``. 429 and 5xx are retried once (honouring a short ``Retry-After``)."""
from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import aiohttp

from daemon.scoring.checks.context import CheckContext, JudgeConfig, outcome

FILE_LIMIT = 20_000
TOTAL_LIMIT = 100_000
MAX_RETRY_WAIT_S = 2.0

SYSTEM_PROMPT = (
    "You are a strict, impartial grader of an AI agent's work. Judge only against the rubric. "
    'Reply with a single JSON object and nothing else: {"score": <number from 0 to 1>, "reason": "<one or two sentences>"}.'
)


class JudgeError(Exception):
    def __init__(self, kind: str, message: str, status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": self.kind, "message": str(self)}
        if self.status is not None:
            body["status"] = self.status
        return body


def parse_verdict(content: str) -> tuple[float, str]:
    """(score in [0, 1], reason) from the model's answer; JudgeError('malformed_response')."""
    text = content.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise JudgeError("malformed_response", f"the judge did not answer with a JSON object: {content[:200]!r}")
    try:
        data = json.loads(text[start:end + 1])
    except (ValueError, RecursionError):
        raise JudgeError("malformed_response", f"the judge's answer is not valid JSON: {content[:200]!r}") from None
    raw = data.get("score", data.get("rating")) if isinstance(data, dict) else None
    if isinstance(raw, str):
        try:
            raw = float(raw)
        except ValueError:
            raw = None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise JudgeError("malformed_response", f"the judge's answer has no numeric score: {content[:200]!r}")
    score = float(raw)
    if 1 < score <= 10:
        score /= 10  # a 0-10 rating
    elif 10 < score <= 100:
        score /= 100  # a percentage
    if not 0 <= score <= 1:
        raise JudgeError("malformed_response", f"the judge's score {raw!r} is out of range")
    return score, str(data.get("reason", ""))[:1000]


async def chat(config: JudgeConfig, model: str, messages: list[dict[str, str]]) -> str:
    """The content of the first choice; JudgeError on any infrastructure failure."""
    if not config.base_url:
        raise JudgeError("not_configured", "no judge is configured: set SERVICE_JUDGE_BASE_URL (and SERVICE_JUDGE_API_KEY, SERVICE_JUDGE_MODEL) for the daemon")
    url = config.base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    payload = {"model": model, "messages": messages, "temperature": 0}
    timeout = aiohttp.ClientTimeout(total=config.timeout_s)
    attempt = 0
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            attempt += 1
            try:
                async with session.post(url, json=payload, headers=headers) as response:
                    text = await response.text()
                    if response.status == 429 or response.status >= 500:
                        kind = "rate_limited" if response.status == 429 else "server_error"
                        error = JudgeError(kind, f"judge answered {response.status}: {text[:200]}", response.status)
                        if attempt <= config.retries:
                            await asyncio.sleep(_retry_wait(response.headers.get("Retry-After"), attempt))
                            continue
                        raise error
                    if response.status >= 400:
                        raise JudgeError("rejected", f"judge answered {response.status}: {text[:200]}", response.status)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                if attempt <= config.retries:
                    await asyncio.sleep(_retry_wait(None, attempt))
                    continue
                raise JudgeError("network", f"cannot reach the judge at {config.base_url}: {type(exc).__name__}: {exc}") from None
            try:
                data = json.loads(text)
                return data["choices"][0]["message"]["content"]
            except (ValueError, KeyError, IndexError, TypeError, RecursionError):
                raise JudgeError("malformed_response", f"not a chat completions answer: {text[:200]!r}") from None


def _retry_wait(header: str | None, attempt: int) -> float:
    try:
        if header is not None:
            return min(MAX_RETRY_WAIT_S, max(0.0, float(header)))
    except ValueError:
        pass
    return min(MAX_RETRY_WAIT_S, 0.25 * 2 ** (attempt - 1))


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


async def evaluate(check, ctx: CheckContext) -> dict:
    config = ctx.judge or JudgeConfig.from_env()
    model = check.model or config.model or "default"
    sections, used = await gather_inputs(check, ctx)
    user = (
        f"Rubric:\n{check.rubric}\n\nTask given to the agent:\n{ctx.redact(ctx.task_prompt)}\n\n"
        "The agent's work:\n" + ("\n\n".join(sections) if sections else "(no files)")
    )
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
    evidence: dict[str, Any] = {"model": model, "threshold": check.threshold, "inputs": used}
    try:
        content = await chat(config, model, messages)
        score, reason = parse_verdict(content)
    except JudgeError as exc:
        return outcome("skipped", {**evidence, "judge_error": exc.as_dict()})
    evidence.update({"score": score, "reason": ctx.redact(reason)})
    return outcome("passed" if score >= check.threshold else "failed", evidence, score)
