"""`svc chat simulate`'s fixtures are new deliveries each time: two simulations in the same second
each get their reply (the daemon deduplicates on event_id, so a reused id would be a silent retry)."""
from __future__ import annotations


from client.commands.chat import fixtures
from daemon.app import create_app
from daemon.chat.bot import BOT
from tests.support.api import api_on
from tests.support.chat import SIGNING_SECRET, install_workspace, slack_app_settings
from tests.support.waiting import wait_for


async def test_two_simulated_mentions_in_the_same_second_get_two_replies(aiohttp_client, tmp_path, slack, llm):
    api = await api_on(aiohttp_client, create_app(slack_app_settings(tmp_path / "home", slack, llm)))
    await install_workspace(api, slack)
    for _ in range(2):
        [(_, _, body, headers)] = [f for f in fixtures(SIGNING_SECRET, "T0ACME", "C0SIM", "") if f[0] == "mention"]
        response = await api.client.post("/v1/chat/events", data=body, headers=headers)
        assert response.status == 200
    await wait_for(lambda: api.app[BOT].idle(), what="chat events handled")
    assert len(slack.posted) == 2
