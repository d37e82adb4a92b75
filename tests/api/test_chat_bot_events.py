"""Which Slack events the bot answers: a mention posted by a bot (its own or another app's, marked
with `bot_id`) gets no reply, so two bots never answer each other in a loop."""
from __future__ import annotations

import pytest

from daemon.app import create_app
from daemon.chat.bot import BOT
from tests.support.api import api_on
from tests.support.chat import SIGNING_SECRET, install_workspace, slack_app_settings
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.slack_signing import app_mention, body_of, signed_headers
from tests.support.waiting import wait_for


@pytest.fixture
def llm():
    with OpenAIServer() as server:
        server.respond = lambda body: Reply(content="an answer")
        yield server


@pytest.fixture
async def api(aiohttp_client, tmp_path, slack, llm):
    return await api_on(aiohttp_client, create_app(slack_app_settings(tmp_path / "home", slack, llm)))


async def deliver(api, payload: dict) -> None:
    body = body_of(payload)
    response = await api.client.post("/v1/chat/events", data=body, headers=signed_headers(SIGNING_SECRET, body))
    assert response.status == 200
    await wait_for(lambda: api.app[BOT].idle(), what="chat events handled")


async def test_a_mention_posted_by_another_bot_gets_no_reply(api, slack, llm):
    await install_workspace(api, slack)
    payload = app_mention("why did exp-1 fail?", user="U0OTHERBOT", ts="1700000100.000200")
    payload["event"]["bot_id"] = "B0OTHERAPP"
    await deliver(api, payload)
    assert (slack.posted, llm.requests) == ([], [])


async def test_a_person_mentioning_the_bot_gets_a_reply(api, slack, llm):
    await install_workspace(api, slack)
    await deliver(api, app_mention("why did exp-1 fail?", user="U0ALICE", ts="1700000100.000200"))
    assert [p["text"] for p in slack.posted] == ["an answer"]
