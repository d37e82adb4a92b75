"""One scoring job's scorers: a rule and a batch of spans -> one result per span
({score, passed, reason, judge_error})."""
from __future__ import annotations

from typing import Any

from daemon.scores.judge_rule import score_llm
from daemon.scores.python_rule import PythonSandbox
from daemon.scores.regex_rule import score_regex
from daemon.appkeys import SANDBOXES, STORE


class Scorers:
    def __init__(self, app: Any, tenant_id: str, job_id: str):
        self.app = app
        self.tenant_id = tenant_id
        self.python = PythonSandbox(app, tenant_id, job_id)

    async def score(self, rule: Any, spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if rule["type"] == "regex":
            return await score_regex(rule["pattern"], rule["threshold"], spans)
        if rule["type"] == "python":
            return await self.python.score(rule["command"], rule["threshold"], spans)
        return await score_llm(self.app[STORE], self.tenant_id, rule, spans)

    async def close(self) -> None:
        if self.python.sandbox_id is not None:
            await self.app[SANDBOXES].destroy(self.python.sandbox_id, reason="score job finished")
