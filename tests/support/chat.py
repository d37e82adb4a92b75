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
