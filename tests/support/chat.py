"""Settings of a daemon installed as a Slack app, against the local Slack and OpenAI servers."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.config import Settings
from tests.support.api import make_settings
from tests.support.openai_server import OpenAIServer
from tests.support.slack_server import SlackServer

SIGNING_SECRET = "slack-signing-secret-value"


def slack_app_settings(home: Path, slack: SlackServer, llm: OpenAIServer, **extra: Any) -> Settings:
    """The app's client id and secret are the Slack server's; events are signed with SIGNING_SECRET."""
    return make_settings(home, chat_client_id=slack.client_id, chat_client_secret=slack.client_secret,
                         chat_signing_secret=SIGNING_SECRET, chat_api_base=slack.url, llm_base_url=llm.url, **extra)


async def install_workspace(api: Any, slack: SlackServer, code: str = "code-1", team: str = "T0ACME", key: str | None = None) -> str:
    """The real OAuth flow for `key`'s tenant (default: the admin's): install URL, Slack's grant,
    callback. Returns the bot token Slack handed out."""
    from urllib.parse import parse_qs, urlparse

    token = slack.grant(code, team_id=team)
    response, body = await api.get("/v1/chat/install-url", key=key)
    assert response.status == 200, body
    state = parse_qs(urlparse(body["url"]).query)["state"][0]
    response = await api.client.get("/v1/chat/oauth/callback", params={"code": code, "state": state}, allow_redirects=False)
    assert response.status == 302, await response.text()
    return token
