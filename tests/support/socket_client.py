"""The real daemon app on a unix socket, and the client library's `Client` holding its API key:
what the MCP server and other in-process client code talk to in tests."""
from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

from aiohttp import web

from client.api import Client
from client.config import ClientConfig, read_env_file
from daemon.app import create_app
from tests.support.api import make_settings
from daemon.appkeys import RUN_SCENARIO


@asynccontextmanager
async def socket_client(home: Path, run_scenario: Any = None) -> AsyncIterator[Client]:
    """`run_scenario`, when given, plays the scenarios (e.g. tests.support.experiments.FakeRunner)."""
    settings = make_settings(home)
    app = create_app(settings)
    if run_scenario is not None:
        app[RUN_SCENARIO] = run_scenario
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(settings.socket_path)).start()
    key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
    client = Client(ClientConfig(base_url=f"unix://{settings.socket_path}", api_key=key, timeout=10, home=home, api_key_source="test"))
    try:
        yield client
    finally:
        await client.close()
        await runner.cleanup()
