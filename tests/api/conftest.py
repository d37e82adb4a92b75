"""API tests: the real aiohttp app and store, in-process, through the real HTTP stack.
Helpers live in tests.support; this file only holds the fixtures."""
from __future__ import annotations

import pytest

from daemon.app import create_app
from daemon.config import Settings
from tests.support.api import Api, api_on, make_settings
from tests.support.experiments import FakeRunner
from tests.support.openai_server import OpenAIServer
from tests.support.slack_server import SlackServer


@pytest.fixture
def settings(tmp_path) -> Settings:
    return make_settings(tmp_path / "home")


@pytest.fixture
async def api(aiohttp_client, settings) -> Api:
    return await api_on(aiohttp_client, create_app(settings))


@pytest.fixture
async def other_tenant_key(api) -> str:
    response, body = await api.post("/v1/tenants", json={"name": "acme"})
    assert response.status == 201, body
    return body["key"]["secret"]


@pytest.fixture
def runner() -> FakeRunner:
    """The experiments' fake scenario runner (modules that want it start their app with it)."""
    return FakeRunner()


@pytest.fixture
def slack():
    """A local Slack Web API server (oauth.v2.access, chat.postMessage, ...) for the chat tests."""
    with SlackServer() as server:
        yield server


@pytest.fixture
def llm():
    """A local OpenAI chat-completions server; a module sets `respond` for its own answers."""
    with OpenAIServer() as server:
        yield server
