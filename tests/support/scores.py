"""Helpers for the score-rule tests: an experiment with spans to score, and waiting for a scoring job."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.support.api import Api
from tests.support.experiments import run_experiment, upload
from tests.support.procs import SvcdProcess
from tests.support.specs import spec_yaml


async def finished_experiment(api: Api, replicas: int = 3, spec_id: str = "demo", extra: str = "") -> dict:
    """A completed experiment of FakeRunner runs: two tool_call spans per run (read_file, write_file),
    no input or output."""
    await upload(api, spec_yaml(spec_id, matrix=[{"mode": "pass"}], replicas=replicas, extra=extra))
    results = await run_experiment(api, name="scored", spec_id=spec_id)
    assert results["status"] == "completed", results
    return results


async def add_llm_spans(api: Api, experiment_id: str, outputs: list[str], inputs: list[str] | None = None) -> list[str]:
    """One llm_call span per output, stamped with the experiment; their span ids."""
    events = [{"event_type": "llm_call", "tool": "chat", "experiment_id": experiment_id, "span_id": f"span_llm_{i}",
               "input": (inputs or [f"question {i}"] * len(outputs))[i], "output": text} for i, text in enumerate(outputs)]
    response, body = await api.post("/v1/traces", json={"events": events})
    assert response.status == 202 and body["accepted"] == len(events), body
    return [e["span_id"] for e in events]


async def create_rule(api: Api, key: str | None = None, expect: int = 201, **fields: Any) -> dict:
    response, body = await api.post("/v1/score-rules", json=fields, key=key)
    assert response.status == expect, body
    return body


async def wait_job(api: Api, job_id: str, timeout: float = 20.0) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        response, body = await api.get(f"/v1/score-jobs/{job_id}")
        if response.status == 429:  # a long job polled past the tenant's rate limit
            await asyncio.sleep(body["details"]["retry_after"])
            continue
        assert response.status == 200, body
        if body["status"] in ("completed", "failed"):
            return body
        assert asyncio.get_running_loop().time() < deadline, f"score job still {body['status']}: {body}"
        await asyncio.sleep(0.02)


async def score(api: Api, experiment_id: str, rule_ids: list[str] | None = None, timeout: float = 20.0) -> dict:
    """Run a scoring job to its end; the finished job."""
    response, body = await api.post(f"/v1/experiments/{experiment_id}/score", json={"rule_ids": rule_ids} if rule_ids else {})
    assert response.status == 202, body
    return await wait_job(api, body["job_id"], timeout)


class JudgedSvcd(SvcdProcess):
    """A real svcd subprocess whose judge is the test's OpenAI-compatible server at `judge_url`."""

    def __init__(self, home: Path, judge_url: str):
        super().__init__(home)
        self.judge_url = judge_url

    def env(self) -> dict[str, str]:
        return {**super().env(), "SERVICE_JUDGE_BASE_URL": self.judge_url, "SERVICE_JUDGE_API_KEY": "sk-test-judge",
                "SERVICE_JUDGE_MODEL": "judge-model", "SERVICE_JUDGE_BACKOFF_S": "0"}
