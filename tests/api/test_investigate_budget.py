"""The agent's token budget: once the model reports 24,000 tokens used, its next call is offered no
tools, so it must answer with what it has."""
from __future__ import annotations

import json


from daemon.app import create_app
from daemon.investigate.agent import MAX_TOKENS
from tests.support.api import api_on, make_settings
from tests.support.openai_server import Reply, tool_call


def costly_tool_call(tokens: int) -> Reply:
    """A tool-call answer whose usage says `tokens` were spent."""
    return Reply(raw=json.dumps({
        "id": "chatcmpl-big", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [tool_call("list_experiments", {})]}}],
        "usage": {"prompt_tokens": tokens - 10, "completion_tokens": 10, "total_tokens": tokens}}))


async def test_past_the_token_budget_the_model_is_offered_no_more_tools(aiohttp_client, tmp_path, llm):
    api = await api_on(aiohttp_client, create_app(make_settings(tmp_path / "home", llm_base_url=llm.url)))
    llm.script(costly_tool_call(MAX_TOKENS + 1), Reply(content="what I have"))
    _, conversation = await api.post("/v1/conversations", json={})
    response, body = await api.post(f"/v1/conversations/{conversation['id']}/messages", json={"content": "why?"})
    assert (response.status, len(llm.requests), "tools" in llm.requests[1]["body"]) == (201, 2, False)
