"""`daemon.judges.evaluate` against a real OpenAI chat-completions server (tests/support/openai_server.py)
and a real SQLite store: graded verdicts, classifier labels, retries, failures that are never scores,
the reformat retry, refusals, the cache."""
from __future__ import annotations

import json
import socket

import pytest

from daemon.judges import JudgeDefinition, evaluate
from daemon.judges.client import close_session
from daemon.store.db import Store
from tests.support.openai_server import OpenAIServer, Reply

KEY = "sk-judge-secret-4242"
SCORE = JudgeDefinition(rubric="Is the answer correct?", threshold=0.7)
CLASSIFIER = JudgeDefinition(rubric="How polite is it?", kind="classifier", choices={"rude": 0.0, "neutral": 0.5, "polite": 1.0},
                             threshold=0.6)


def verdict_json(score: float, reason: str = "graded") -> str:
    return json.dumps({"score": score, "reason": reason})


@pytest.fixture
def llm(monkeypatch):
    with OpenAIServer() as server:
        monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", server.url)
        monkeypatch.setenv("SERVICE_JUDGE_API_KEY", KEY)
        monkeypatch.setenv("SERVICE_JUDGE_MODEL", "grader-1")
        monkeypatch.setenv("SERVICE_JUDGE_BACKOFF_S", "0.01")
        yield server


@pytest.fixture
async def store(tmp_path):
    db = await Store.open(tmp_path / "svc.db")
    yield db
    await close_session()
    await db.close()


async def judge_once(store, definition=SCORE, **kw):
    return await evaluate(store, definition, input="2+2?", output="4", **kw)


@pytest.mark.parametrize("score, passed", [(0.8, True), (0.7, True), (0.6, False)])
async def test_a_graded_answer_passes_at_or_above_the_threshold(llm, store, score, passed):
    llm.respond = lambda body: Reply(content=verdict_json(score))
    verdict = await judge_once(store)
    assert (verdict.score, verdict.passed, verdict.judge_error) == (score, passed, None)


async def test_the_request_asks_for_structured_output_with_the_rubric_and_the_answer(llm, store):
    await evaluate(store, SCORE, input="2+2?", output="four", expected="4")
    body = llm.requests[0]["body"]
    schema = body["response_format"]["json_schema"]["schema"]
    prompt = body["messages"][-1]["content"]
    assert (body["model"], schema["required"], "Is the answer correct?" in prompt, "four" in prompt, "Expected" in prompt) == \
        ("grader-1", ["score", "reason"], True, True, True)


async def test_a_classifier_maps_its_label_to_the_choice_score(llm, store):
    llm.respond = lambda body: Reply(content=json.dumps({"label": "neutral", "reason": "flat"}))
    verdict = await judge_once(store, CLASSIFIER)
    assert (verdict.label, verdict.score, verdict.passed) == ("neutral", 0.5, False)


async def test_a_classifier_offers_its_labels_as_an_enum(llm, store):
    llm.respond = lambda body: Reply(content=json.dumps({"label": "polite", "reason": "kind"}))
    await judge_once(store, CLASSIFIER)
    schema = llm.requests[0]["body"]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["label"]["enum"] == ["rude", "neutral", "polite"]


async def test_429_with_retry_after_is_retried_into_one_verdict(llm, store):
    llm.script(Reply(status=429, headers={"Retry-After": "0"}), Reply(content=verdict_json(0.9)))
    verdict = await judge_once(store)
    assert (verdict.score, len(llm.requests)) == (0.9, 2)


async def test_three_500s_are_a_server_error_and_no_score(llm, store):
    llm.respond = lambda body: Reply(status=500)
    verdict = await judge_once(store)
    assert (verdict.score, verdict.passed, verdict.judge_error["code"], len(llm.requests)) == (None, None, "server_error", 3)


async def test_a_rate_limit_that_never_lifts_is_rate_limited(llm, store):
    llm.respond = lambda body: Reply(status=429, headers={"Retry-After": "0"})
    verdict = await judge_once(store)
    assert (verdict.score, verdict.judge_error["code"]) == (None, "rate_limited")


async def test_garbage_twice_is_unparsable_after_exactly_one_reformat_request(llm, store):
    llm.respond = lambda body: Reply(content="I think it is fine, probably.")
    verdict = await judge_once(store)
    follow_up = llm.requests[-1]["body"]["messages"]
    assert (verdict.judge_error["code"], len(llm.requests), follow_up[-2]["role"], "only the JSON object" in follow_up[-1]["content"]) == \
        ("unparsable", 2, "assistant", True)


async def test_garbage_then_json_after_the_reformat_request_is_a_verdict(llm, store):
    llm.script(Reply(content="Sure! Score: high"), Reply(content=verdict_json(0.75)))
    verdict = await judge_once(store)
    assert (verdict.score, verdict.passed) == (0.75, True)


@pytest.mark.parametrize("content", ['{"rating": 7, "reason": "x"}', '{"score": "0.9", "reason": "x"}', '{"score": 1.5, "reason": "x"}',
                                     '{"score": true, "reason": "x"}', '{"score": 0.5}'])
async def test_replies_outside_the_schema_are_unparsable(llm, store, content):
    llm.respond = lambda body: Reply(content=content)
    verdict = await judge_once(store)
    assert verdict.judge_error["code"] == "unparsable"


async def test_a_slow_reply_beyond_the_timeout_is_a_timeout(llm, store, monkeypatch):
    monkeypatch.setenv("SERVICE_JUDGE_TIMEOUT_S", "0.2")
    llm.respond = lambda body: Reply(content=verdict_json(1), delay_s=1.0)
    verdict = await judge_once(store)
    assert (verdict.score, verdict.judge_error["code"]) == (None, "timeout")


@pytest.mark.parametrize("reply", [
    Reply(raw=json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": None, "refusal": "I can't grade this."}}]})),
    Reply(content="", finish_reason="content_filter"),
])
async def test_a_refusal_is_a_refusal_not_a_score(llm, store, reply):
    llm.respond = lambda body: reply
    verdict = await judge_once(store)
    assert (verdict.score, verdict.judge_error["code"], len(llm.requests)) == (None, "refusal", 1)


async def test_an_unreachable_judge_is_a_network_error(store, monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("SERVICE_JUDGE_BACKOFF_S", "0.01")
    verdict = await judge_once(store)
    assert verdict.judge_error["code"] == "network"


async def test_no_configured_judge_is_not_configured(store, monkeypatch):
    monkeypatch.delenv("SERVICE_JUDGE_BASE_URL", raising=False)
    verdict = await judge_once(store)
    assert (verdict.score, verdict.judge_error["code"]) == (None, "not_configured")


async def test_the_api_key_echoed_by_the_judge_is_not_in_the_error(llm, store):
    llm.respond = lambda body: Reply(status=500, raw=f"upstream broke while checking Bearer {KEY}")
    verdict = await judge_once(store)
    assert KEY not in verdict.judge_error["message"] and "[redacted]" in verdict.judge_error["message"]


async def test_a_cached_verdict_makes_no_second_request(llm, store):
    llm.respond = lambda body: Reply(content=verdict_json(0.9))
    await judge_once(store)
    again = await judge_once(store)
    assert (again.score, len(llm.requests)) == (0.9, 1)


async def test_use_cache_false_asks_the_judge_again(llm, store):
    llm.respond = lambda body: Reply(content=verdict_json(0.9))
    await judge_once(store)
    await judge_once(store, use_cache=False)
    assert len(llm.requests) == 2


async def test_a_failed_verdict_is_not_cached(llm, store):
    llm.script(*[Reply(status=500)] * 3)
    llm.respond = lambda body: Reply(content=verdict_json(0.4))
    await judge_once(store)
    again = await judge_once(store)
    assert (again.score, again.judge_error) == (0.4, None)


async def test_the_cache_is_per_tenant(llm, store):
    llm.respond = lambda body: Reply(content=verdict_json(0.9))
    await judge_once(store, tenant_id="t1")
    await judge_once(store, tenant_id="t2")
    assert len(llm.requests) == 2


async def test_the_tenant_dashboard_secret_is_the_key_when_the_daemon_has_none(llm, store, monkeypatch):
    monkeypatch.delenv("SERVICE_JUDGE_API_KEY")
    await store.execute("INSERT INTO tenants (id, name, created_at) VALUES ('t1', 't1', 'now')")
    await store.execute("INSERT INTO secrets (tenant_id, name, value, created_at, updated_at)"
                        " VALUES ('t1', 'SERVICE_JUDGE_API_KEY', 'sk-tenant-77', 'now', 'now')")
    await judge_once(store, tenant_id="t1")
    assert llm.requests[0]["headers"]["Authorization"] == "Bearer sk-tenant-77"


@pytest.mark.parametrize("header, wait", [("2", 2.0), ("120", 10.0), ("-1", 0.0), ("Wed, 21 Oct 2015 07:28:00 GMT", None), (None, None)])
def test_retry_after_is_honoured_up_to_ten_seconds(header, wait):
    from daemon.judges.client import _retry_after

    assert _retry_after(header) == wait


def test_a_zero_timeout_setting_falls_back_to_the_default(monkeypatch):
    from daemon.judges import JudgeConfig

    monkeypatch.setenv("SERVICE_JUDGE_TIMEOUT_S", "0")
    assert JudgeConfig.from_env().timeout_s == 60.0


async def test_an_output_longer_than_the_limit_is_cut_in_the_prompt(llm, store):
    await evaluate(store, SCORE, input="q", output="y" * 250_000)
    prompt = llm.requests[0]["body"]["messages"][-1]["content"]
    assert ("y" * 100_001 in prompt, "cut at 100000 characters" in prompt) == (False, True)
