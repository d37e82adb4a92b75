"""A reply Slack rate-limits (HTTP 429 with Retry-After) is posted again, not lost; a reply still
refused after the retries is given up (one post attempt more, no loop)."""
from __future__ import annotations

import pytest

from daemon.app import create_app
from daemon.chat.bot import BOT, REPLY_RETRIES
from tests.support.api import api_on
from tests.support.chat import SIGNING_SECRET, install_workspace, slack_app_settings
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.slack_signing import app_mention, body_of, signed_headers
from tests.support.waiting import wait_for


@pytest.fixture
def llm():
    with OpenAIServer() as server:
        server.respond = lambda body: Reply(content="exp-1 failed on invariant wrote.")
        yield server


@pytest.fixture
async def api(aiohttp_client, tmp_path, slack, llm):
    return await api_on(aiohttp_client, create_app(slack_app_settings(tmp_path / "home", slack, llm)))


async def mention(api) -> None:
    body = body_of(app_mention("why did exp-1 fail?", channel="C0INC", ts="1700000100.000200"))
    response = await api.client.post("/v1/chat/events", data=body, headers=signed_headers(SIGNING_SECRET, body))
    assert response.status == 200
    await wait_for(lambda: api.app[BOT].idle(), what="chat events handled")


def post_calls(slack) -> int:
    return sum(1 for c in slack.calls if c["method"] == "chat.postMessage")


async def test_a_rate_limited_reply_is_posted_after_retry_after(api, slack):
    await install_workspace(api, slack)
    slack.fail("chat.postMessage", status=429, retry_after=0)
    await mention(api)
    assert [p["thread_ts"] for p in slack.posted] == ["1700000100.000200"]


async def test_a_reply_rate_limited_every_time_is_given_up_after_the_retries(api, slack):
    await install_workspace(api, slack)
    for _ in range(REPLY_RETRIES + 2):
        slack.fail("chat.postMessage", status=429, retry_after=0)
    await mention(api)
    assert (slack.posted, post_calls(slack)) == ([], REPLY_RETRIES + 1)
