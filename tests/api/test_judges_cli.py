"""`svc judges ...` through the real CLI against the in-process daemon (over TCP), the model played by a
real OpenAI chat-completions server."""
from __future__ import annotations

import json

import pytest

from tests.support.cli import svc_json_in_thread
from tests.support.openai_server import OpenAIServer, Reply


@pytest.fixture
def llm(monkeypatch):
    with OpenAIServer() as server:
        monkeypatch.setenv("SERVICE_JUDGE_BASE_URL", server.url)
        monkeypatch.setenv("SERVICE_JUDGE_BACKOFF_S", "0.01")
        server.respond = lambda body: Reply(content=json.dumps({"score": 0.9 if "good" in body["messages"][-1]["content"] else 0.1,
                                                                "reason": "graded"}))
        yield server


async def new_judge(api, *extra: str) -> dict:
    code, judge, err = await svc_json_in_thread(api, "judges", "create", "--name", "tone", "--rubric", "Is it right?", *extra)
    assert code == 0, err
    return judge


async def test_create_with_choices_makes_a_classifier(api):
    judge = await new_judge(api, "--choice", "bad=0", "--choice", "good=1")
    code, got, _ = await svc_json_in_thread(api, "judges", "get", judge["id"])
    assert (code, got["kind"], got["choices"]) == (0, "classifier", {"bad": 0.0, "good": 1.0})


async def test_a_choice_without_a_score_is_a_usage_error(api):
    code, _, err = await svc_json_in_thread(api, "judges", "create", "--name", "t", "--rubric", "r", "--choice", "polite")
    assert (code, "LABEL=SCORE" in err) == (1, True)


async def test_list_shows_created_judges(api):
    judge = await new_judge(api)
    code, listing, _ = await svc_json_in_thread(api, "judges", "list")
    assert (code, [j["id"] for j in listing["items"]]) == (0, [judge["id"]])


async def test_eval_prints_the_verdict(api, llm):
    judge = await new_judge(api, "--threshold", "0.8")
    code, verdict, _ = await svc_json_in_thread(api, "judges", "eval", judge["id"], "--input", "q", "--output", "a good answer")
    assert (code, verdict["score"], verdict["passed"]) == (0, 0.9, True)


async def test_eval_reads_a_file_given_with_at(api, llm, tmp_path):
    judge = await new_judge(api)
    (tmp_path / "answer.txt").write_text("a good answer from a file")
    await svc_json_in_thread(api, "judges", "eval", judge["id"], "--input", "q", "--output", f"@{tmp_path / 'answer.txt'}")
    assert "a good answer from a file" in llm.requests[-1]["body"]["messages"][-1]["content"]


async def test_eval_no_cache_asks_the_judge_again(api, llm):
    judge = await new_judge(api)
    for flags in ((), ("--no-cache",)):
        await svc_json_in_thread(api, "judges", "eval", judge["id"], "--input", "q", "--output", "good", *flags)
    assert len(llm.requests) == 2


async def test_a_failed_judge_call_exits_1_naming_the_code(api, llm):
    judge = await new_judge(api)
    llm.respond = lambda body: Reply(status=503)
    code, verdict, err = await svc_json_in_thread(api, "judges", "eval", judge["id"], "--input", "q", "--output", "a")
    assert (code, verdict["score"], "server_error" in err) == (1, None, True)


async def test_calibrate_reads_json_lines(api, llm, tmp_path):
    judge = await new_judge(api)
    rows = [{"input": "q", "output": "good", "label": True}, {"input": "q", "output": "bad", "label": False},
            {"input": "q", "output": "good too", "label": False}]
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, result, err = await svc_json_in_thread(api, "judges", "calibrate", judge["id"], str(path))
    assert (code, result["confusion"], "warning: only 3 scored examples" in err) == (0, {"tp": 1, "fp": 1, "tn": 1, "fn": 0}, True)


async def test_calibrate_reads_a_json_array(api, llm, tmp_path):
    judge = await new_judge(api)
    path = tmp_path / "labelled.json"
    path.write_text(json.dumps([{"input": "q", "output": "good", "label": True}, {"input": "q", "output": "bad", "label": False}]))
    code, result, _ = await svc_json_in_thread(api, "judges", "calibrate", judge["id"], str(path))
    assert (code, result["agreement"]) == (0, 1.0)


async def test_delete_removes_the_judge(api):
    judge = await new_judge(api)
    code, _, err = await svc_json_in_thread(api, "judges", "delete", judge["id"])
    again, _, _ = await svc_json_in_thread(api, "judges", "get", judge["id"])
    assert (code, again) == (0, 1)
