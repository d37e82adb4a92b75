"""A judge model answers with the keys asked for plus extra ones (`passed`, `confidence`, ...): the
daemon reads the keys it needs and ignores the rest, so the verdict is not lost as `unparsable`, and
an extra `passed` (the model, maybe talked into it by the agent's output) decides nothing: the daemon
compares the score with the judge's threshold itself (daemon/judges/client.py parse_reply)."""
from __future__ import annotations

import json

import pytest

from tests.support.openai_server import OpenAIServer, Reply


@pytest.fixture
def judge_llm(monkeypatch):
    with OpenAIServer() as server:
        monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", server.url)
        monkeypatch.setenv("SERVICE_JUDGE_API_KEY", "sk-api-test-1")
        monkeypatch.setenv("SERVICE_JUDGE_BACKOFF_S", "0.01")
        yield server


async def verdict_for(api, llm, reply: dict) -> dict:
    llm.respond = lambda body: Reply(content=json.dumps(reply))
    response, judge = await api.post("/v1/judges", json={"name": "correctness", "rubric": "Is it right?", "threshold": 0.7})
    assert response.status == 201, judge
    response, verdict = await api.post(f"/v1/judges/{judge['id']}/eval", json={"input": "2+2?", "output": "4"})
    assert response.status == 200, verdict
    return verdict


async def test_a_reply_with_extra_keys_is_read(api, judge_llm):
    verdict = await verdict_for(api, judge_llm, {"score": 0.9, "reason": "correct", "passed": True})
    assert (verdict["score"], verdict["passed"], verdict["judge_error"]) == (0.9, True, None)


async def test_an_extra_passed_key_does_not_decide_the_verdict(api, judge_llm):
    verdict = await verdict_for(api, judge_llm, {"score": 0.2, "reason": "wrong", "passed": True})
    assert (verdict["score"], verdict["passed"]) == (0.2, False)


async def test_a_reply_missing_the_score_is_still_unparsable(api, judge_llm):
    verdict = await verdict_for(api, judge_llm, {"reason": "correct", "passed": True})
    assert verdict["judge_error"]["code"] == "unparsable"


async def test_a_reply_with_a_text_score_is_still_unparsable(api, judge_llm):
    verdict = await verdict_for(api, judge_llm, {"score": "0.9", "reason": "correct", "confidence": 1})
    assert verdict["judge_error"]["code"] == "unparsable"
