"""The investigation agent through /v1/conversations: a real local OpenAI server plays the model
and asks for tools; the daemon runs them over the tenant's own data and answers with the model's
reply."""
from __future__ import annotations

import json

import pytest

from daemon.app import create_app
from tests.support.api import api_on, make_settings
from tests.support.openai_server import Reply, tool_call
from tests.support.specs import hello_yaml


@pytest.fixture
async def api(aiohttp_client, tmp_path, llm):
    return await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home", llm_base_url=llm.url, llm_model="gpt-test")))


async def new_experiment(api, name: str, key: str | None = None) -> str:
    await api.upload_yaml(hello_yaml(f"spec-{name}"), name=f"spec-{name}", key=key)
    response, body = await api.post("/v1/experiments", json={"spec_id": f"spec-{name}", "name": name}, key=key)
    assert response.status == 201, body
    return body["id"]


async def ask(api, question: str, key: str | None = None) -> dict:
    response, conversation = await api.post("/v1/conversations", json={"title": "t"}, key=key)
    assert response.status == 201, conversation
    response, body = await api.post(f"/v1/conversations/{conversation['id']}/messages", json={"content": question}, key=key)
    assert response.status == 201, body
    return body


def tool_results(llm) -> list[str]:
    return [m["content"] for r in llm.requests for m in r["body"]["messages"] if m["role"] == "tool"]


async def test_the_answer_is_the_models_reply_after_its_tool_calls(api, llm):
    experiment_id = await new_experiment(api, "nightly")
    llm.script(Reply(tool_calls=[tool_call("get_experiment", {"experiment_id": experiment_id})]),
               Reply(content=f"{experiment_id} has not run yet."))
    body = await ask(api, f"why did {experiment_id} fail?")
    assert (body["answer"]["content"], [c["name"] for c in body["answer"]["tool_calls"]]) == \
        (f"{experiment_id} has not run yet.", ["get_experiment"])


async def test_a_tool_reads_the_tenants_own_experiment(api, llm):
    experiment_id = await new_experiment(api, "nightly")
    llm.script(Reply(tool_calls=[tool_call("get_experiment", {"experiment_id": experiment_id})]), Reply(content="ok"))
    await ask(api, "look")
    assert json.loads(tool_results(llm)[0])["name"] == "nightly"


async def test_another_tenants_experiment_is_not_found_by_the_tools(api, llm, other_tenant_key):
    theirs = await new_experiment(api, "their-secret-run", key=other_tenant_key)
    llm.script(Reply(tool_calls=[tool_call("get_experiment", {"experiment_id": theirs}),
                                 tool_call("list_experiments", {}, call_id="call_2")]), Reply(content="nothing"))
    await ask(api, "look")
    assert ("not found" in tool_results(llm)[0], "their-secret-run" in "".join(tool_results(llm))) == (True, False)


async def test_another_tenants_spans_are_not_found_by_the_tools(api, llm, other_tenant_key):
    response, _ = await api.post("/v1/traces", json={"events": [{"event_type": "llm_call", "trace_id": "trace-theirs",
                                                                 "input": "their prompt"}]}, key=other_tenant_key)
    assert response.status == 202
    llm.script(Reply(tool_calls=[tool_call("find_spans", {"trace_id": "trace-theirs"})]), Reply(content="nothing"))
    await ask(api, "look")
    assert json.loads(tool_results(llm)[0]) == {"spans": []}


async def test_a_second_question_sends_the_earlier_turns(api, llm):
    llm.script(Reply(content="first answer"), Reply(content="second answer"))
    response, conversation = await api.post("/v1/conversations", json={})
    for question in ("first question", "second question"):
        await api.post(f"/v1/conversations/{conversation['id']}/messages", json={"content": question})
    seen = [(m["role"], m["content"]) for m in llm.requests[-1]["body"]["messages"][1:]]
    assert seen == [("user", "first question"), ("assistant", "first answer"), ("user", "second question")]


async def test_a_model_failure_is_reported_not_invented(api, llm):
    llm.script(Reply(status=429, headers={"Retry-After": "0"}))
    body = await ask(api, "why?")
    assert (body["answer"]["error"], body["answer"]["content"].startswith("The investigation model failed (rate_limited)")) == \
        ("rate_limited", True)


async def test_the_loop_stops_after_its_step_budget(api, llm):
    llm.respond = lambda body: (Reply(tool_calls=[tool_call("list_experiments", {})]) if body.get("tools") else
                                Reply(content="what I found so far"))
    body = await ask(api, "loop forever")
    assert (len(llm.requests), body["answer"]["content"]) == (6, "what I found so far")


async def test_a_bad_tool_argument_is_answered_to_the_model_as_an_error(api, llm):
    llm.script(Reply(tool_calls=[tool_call("get_run", {"run_id": "x" * 500})]), Reply(content="ok"))
    await ask(api, "look")
    assert "run_id: expected an id" in json.loads(tool_results(llm)[0])["error"]


async def test_without_a_model_asking_is_409_not_configured(aiohttp_client, tmp_path):
    api = await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home")))
    response, conversation = await api.post("/v1/conversations", json={})
    response, body = await api.post(f"/v1/conversations/{conversation['id']}/messages", json={"content": "why?"})
    assert (response.status, body["details"]["state"]) == (409, "not_configured")


async def test_a_conversation_lists_its_messages(api, llm):
    llm.script(Reply(content="an answer"))
    body = await ask(api, "a question")
    response, conversation = await api.get(f"/v1/conversations/{body['conversation_id']}")
    assert [(m["role"], m["content"]) for m in conversation["messages"]] == [("user", "a question"), ("assistant", "an answer")]


async def test_another_tenants_conversation_is_forbidden(api, llm, other_tenant_key):
    response, conversation = await api.post("/v1/conversations", json={})
    response, body = await api.post(f"/v1/conversations/{conversation['id']}/messages", json={"content": "hi"}, key=other_tenant_key)
    assert (response.status, llm.requests) == (403, [])


async def test_clients_cannot_claim_a_chat_thread(api):
    response, body = await api.post("/v1/conversations", json={"metadata": {"chat_key": "T1:C1:1.2"}})
    assert (response.status, body["details"]["errors"][0]["loc"]) == (400, "metadata")


async def test_conversations_page_newest_first(api):
    ids = [(await api.post("/v1/conversations", json={"title": f"c{i}"}))[1]["id"] for i in range(3)]
    _, first = await api.get("/v1/conversations", params={"limit": 2})
    _, second = await api.get("/v1/conversations", params={"limit": 2, "cursor": first["next_cursor"]})
    assert [c["id"] for c in first["items"] + second["items"]] == ids[::-1]
