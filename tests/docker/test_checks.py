"""Every invariant check type against a real sandbox (postgres, a recording http_mock, files,
commands, custom scripts), and llm_as_judge against a real local OpenAI-compatible server: pass,
fail, and judge infrastructure failures (500, 429, malformed) as `skipped` + `error`, never 0."""
from __future__ import annotations

import json

import pytest
import pytest_asyncio

from tests.support.runs import (
    FakeJudge,
    cli_spec,
    inv,
    replay_with_cli,
    result,
    run_spec,
    statuses,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

AGENT = r"""
set -e
echo "hello world 42" > greeting.txt
mkdir -p build && echo ok > build/done
ln -s /etc/hostname link.txt
curl -sf -X POST -H 'Content-Type: application/json' -d '{"amount": 5}' "$SERVICE_SERVICE_PAY_URL/charge" > charge.json
curl -sf "$SERVICE_SERVICE_PAY_URL/users/7" > user.json
echo agent done
"""

CUSTOM_OK = "python3 -c \"import json; print('checking...'); print(json.dumps({'passed': True, 'score': 0.75, 'evidence': {'files': 2}}))\""

ALL_CHECKS = cli_spec("all-checks", AGENT, {
    "exists_pass": inv({"type": "file_exists", "path": "greeting.txt"}),
    "exists_fail": inv({"type": "file_exists", "path": "/workspace/nothing.txt"}),
    "absent_pass": inv({"type": "file_absent", "path": "nothing.txt"}),
    "absent_fail": inv({"type": "file_absent", "path": "build/done"}),
    "contains": inv({"type": "file_content", "path": "greeting.txt", "contains": "hello"}),
    "regex": inv({"type": "file_content", "path": "greeting.txt", "regex": r"world \d+$"}),
    "equals_fail": inv({"type": "file_content", "path": "greeting.txt", "equals": "hello"}),
    "through_symlink": inv({"type": "file_content", "path": "link.txt", "contains": "sandbox"}),
    "cmd_pass": inv({"type": "command_exit", "command": "test -f build/done"}),
    "cmd_fail": inv({"type": "command_exit", "command": "echo oops >&2; exit 3"}),
    "cmd_expect_3": inv({"type": "command_exit", "command": "exit 3", "expect_exit_code": 3}),
    "sql_scalar": inv({"type": "sql", "service": "db", "query": "SELECT count(*) FROM items;", "expect_scalar": 2}),
    "sql_rows": inv({"type": "sql", "service": "db", "query": "SELECT * FROM items", "expect_rows": 2}),
    "sql_expect": inv({"type": "sql", "service": "db", "query": "SELECT id, name FROM items ORDER BY id",
                       "expect": [[1, "apple"], {"name": "pear"}]}),
    "sql_bad_query": inv({"type": "sql", "service": "db", "query": "SELECT * FROM missing_table", "expect_rows": 0}),
    "mock_pass": inv({"type": "http_mock_assertions", "service": "pay", "assertions": [
        {"method": "POST", "path": "/charge", "count": 1, "body_contains": "amount"},
        {"method": "GET", "path": "/users/*", "min_count": 1},
    ]}),
    "mock_fail": inv({"type": "http_mock_assertions", "service": "pay", "assertions": [
        {"method": "POST", "path": "/refund", "count": 1},
    ]}),
    "custom_pass": inv({"type": "custom", "command": CUSTOM_OK}),
    "custom_garbage": inv({"type": "custom", "command": "echo not json"}),
}, services=[
    {"name": "db", "type": "postgres", "wait_for": {"port": 5432, "timeout": "60s"}},
    {"name": "pay", "type": "http_mock", "record": True, "routes": [
        {"method": "POST", "path": "/charge", "response": {"status": 200, "body": {"ok": True}}},
        {"method": "GET", "path": "/users/*", "response": {"status": 200, "body": {"id": 7}}},
    ]},
], fixtures=[{"service": "db", "sql": "CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'apple'), (2, 'pear');"}])


async def test_every_check_type_with_evidence(api):
    run = await run_spec(api, ALL_CHECKS)
    expected = {
        "exists_pass": "passed", "exists_fail": "failed", "absent_pass": "passed", "absent_fail": "failed",
        "contains": "passed", "regex": "passed", "equals_fail": "failed", "through_symlink": "passed",
        "cmd_pass": "passed", "cmd_fail": "failed", "cmd_expect_3": "passed",
        "sql_scalar": "passed", "sql_rows": "passed", "sql_expect": "passed", "sql_bad_query": "failed",
        "mock_pass": "passed", "mock_fail": "failed", "custom_pass": "passed", "custom_garbage": "failed",
    }
    assert statuses(run) == expected, json.dumps(run["invariant_results"], indent=1)
    assert run["status"] == "failed"
    assert result(run, "regex")["evidence"]["match"] == "world 42"
    assert result(run, "equals_fail")["evidence"]["content"] == "hello world 42\n"
    fail = result(run, "cmd_fail")["evidence"]
    assert fail["exit_code"] == 3 and fail["expected_exit_code"] == 0 and "oops" in fail["stderr"]
    assert result(run, "sql_scalar")["evidence"]["value"] == 2
    assert result(run, "sql_expect")["evidence"]["rows"] == [{"id": 1, "name": "apple"}, {"id": 2, "name": "pear"}]
    assert "missing_table" in result(run, "sql_bad_query")["evidence"]["error"]
    mock = result(run, "mock_pass")["evidence"]
    assert mock["request_count"] == 2 and [a["seen"] for a in mock["assertions"]] == [1, 1]
    assert result(run, "mock_fail")["evidence"]["assertions"][0] == {
        "method": "POST", "path": "/refund", "seen": 0, "count": 1, "passed": False}
    custom = result(run, "custom_pass")
    assert custom["score"] == 0.75 and custom["evidence"]["files"] == 2
    assert "did not print a JSON object" in result(run, "custom_garbage")["evidence"]["error"]
    # the graded custom score counts in the composite: 12 passed (one at 0.75) + 7 failed over 19
    assert run["score"] == pytest.approx((11 + 0.75) / 19, abs=1e-6)


JUDGED = cli_spec("judged", "echo 'Bonjour, Ada!' > answer.txt", {
    "greeting": inv({"type": "file_exists", "path": "answer.txt"}),
    "polite": inv({"type": "llm_as_judge", "rubric": "The answer greets Ada politely in French.", "inputs": ["answer.txt"],
                   "threshold": 0.7}),
}, scoring={"pass_threshold": 0.8})


@pytest_asyncio.fixture(loop_scope="module")
async def judge(monkeypatch):
    server = await FakeJudge().start()
    monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", server.url)
    monkeypatch.setenv("SERVICE_JUDGE_API_KEY", "judge-key-123")
    monkeypatch.setenv("SERVICE_JUDGE_MODEL", "fake-grader")
    yield server
    await server.stop()


async def test_llm_as_judge_pass_fail_and_replay(api, judge):
    judge.mode = 0.9
    passed = await run_spec(api, JUDGED)
    assert passed["status"] == "passed", json.dumps(passed["invariant_results"], indent=1)
    polite = result(passed, "polite")
    assert polite["score"] == 0.9 and polite["evidence"]["reason"] == "graded 0.9"
    assert polite["evidence"]["model"] == "fake-grader" and polite["evidence"]["inputs"] == ["answer.txt"]
    sent = judge.requests[-1]
    assert sent["auth"] == "Bearer judge-key-123" and sent["body"]["model"] == "fake-grader"
    prompt = sent["body"]["messages"][-1]["content"]
    assert "greets Ada politely in French" in prompt and "Bonjour, Ada!" in prompt
    assert passed["score"] == pytest.approx(0.95)
    code, replayed = await replay_with_cli(api, passed)
    assert code == 0 and replayed["status"] == "passed"

    judge.mode = 0.2
    failed = await run_spec(api, spec_id="judged")
    assert failed["status"] == "failed" and result(failed, "polite")["status"] == "failed"
    assert result(failed, "polite")["score"] == 0.2 and failed["score"] == pytest.approx(0.6)
    code, replayed = await replay_with_cli(api, failed)
    assert code == 1 and replayed["status"] == "failed"


@pytest.mark.parametrize("mode, kind", [("down", "server_error"), ("limited", "rate_limited"), ("garbage", "unparsable")])
async def test_judge_infrastructure_failure_is_skipped_and_error(api, judge, mode, kind):
    judge.mode = mode
    run = await run_spec(api, JUDGED)
    polite = result(run, "polite")
    assert polite["status"] == "skipped" and polite["score"] is None
    assert polite["evidence"]["judge_error"]["code"] == kind
    assert run["status"] == "errored" and run["verdict"] == "error"
    assert run["score"] == 1.0  # the judge's failure is not a 0: only the scored invariant counts
    if mode != "garbage":
        assert len(judge.requests) >= 2  # retried
    if mode == "down":
        code, replayed = await replay_with_cli(api, run)
        assert code == 1 and replayed["status"] == "errored"
        assert result(replayed, "polite")["evidence"]["judge_error"]["code"] == "server_error"


async def test_judge_not_configured_is_skipped(api, monkeypatch):
    monkeypatch.delenv("SERVICE_JUDGE_BASE_URL", raising=False)
    run = await run_spec(api, {**JUDGED, "id": "judged-unconfigured"})
    assert result(run, "polite")["evidence"]["judge_error"]["code"] == "not_configured"
    assert run["status"] == "errored"
