"""`evaluate`: one judge verdict on (input, output, expected), answered from the cache when it can be.

This is the public entry point for everything that judges (the judges API, score rules, behaviors)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from daemon.contract.judges import MAX_VALUE_CHARS
from daemon.judges.client import JudgeConfig, JudgeFailure, judge, system_prompt
from daemon.store import judges as repo
from daemon.store.db import Store

API_KEY_SECRET = "SERVICE_JUDGE_API_KEY"


@dataclass(frozen=True)
class JudgeDefinition:
    rubric: str
    model: str | None = None
    threshold: float = 0.5
    kind: Literal["score", "classifier"] = "score"
    choices: dict[str, float] | None = None  # {label: score}, required for a classifier


@dataclass(frozen=True)
class Verdict:
    score: float | None  # None when the judge call failed: never 0
    passed: bool | None
    reason: str
    judge_error: dict | None  # {"code", "message"}
    label: str | None = None  # the classifier's chosen label


async def evaluate(store: Store, definition: JudgeDefinition, *, input: Any, output: Any, expected: Any = None,
                   use_cache: bool = True, tenant_id: str | None = None) -> Verdict:
    """The verdict of `definition` on `output`; a failed call is a Verdict with `judge_error` and
    score None. Only successful verdicts are cached (per tenant)."""
    config = await config_for(store, tenant_id)
    model = definition.model or config.model or "default"
    key = cache_key(model, definition, input, output, expected)
    if use_cache:
        hit = await repo.cached(store, tenant_id or "", key)
        if hit is not None:
            return _verdict(definition, hit["score"], hit["reason"], hit["label"])
    try:
        reply = await judge(config, model, messages(definition, input, output, expected), definition.kind, definition.choices)
    except JudgeFailure as exc:
        return Verdict(score=None, passed=None, reason="", judge_error=exc.as_dict())
    await repo.remember(store, tenant_id or "", key, score=reply.score, label=reply.label, reason=reply.reason)
    return _verdict(definition, reply.score, reply.reason, reply.label)


async def config_for(store: Store, tenant_id: str | None) -> JudgeConfig:
    """The daemon's judge settings; without SERVICE_JUDGE_API_KEY, the tenant's dashboard secret of that name."""
    config = JudgeConfig.from_env()
    if config.api_key or tenant_id is None:
        return config
    from daemon.store.secrets import dashboard_secrets

    return JudgeConfig.from_env((await dashboard_secrets(store, tenant_id)).get(API_KEY_SECRET))


def _verdict(definition: JudgeDefinition, score: float, reason: str, label: str | None) -> Verdict:
    return Verdict(score=score, passed=score >= definition.threshold, reason=reason, judge_error=None, label=label)


def cache_key(model: str, definition: JudgeDefinition, input: Any, output: Any, expected: Any) -> str:
    """sha256 over everything that decides the verdict (not the threshold: `passed` is derived)."""
    material = {"model": model, "rubric": definition.rubric, "kind": definition.kind, "choices": definition.choices,
                "input": input, "output": output, "expected": expected}
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def _text(value: Any) -> str:
    """The value as prompt text; past MAX_VALUE_CHARS (a span from a trace can be any size) it is cut."""
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + f"\n…(cut at {MAX_VALUE_CHARS} characters)"


def messages(definition: JudgeDefinition, input: Any, output: Any, expected: Any) -> list[dict[str, str]]:
    user = f"Rubric:\n{definition.rubric}\n\nInput:\n{_text(input)}\n\nOutput to judge:\n{_text(output)}"
    if expected is not None:
        user += f"\n\nExpected (reference) output:\n{_text(expected)}"
    return [{"role": "system", "content": system_prompt(definition.kind, definition.choices)},
            {"role": "user", "content": user}]
