"""The attack suite (`pytest tests/security`): each test drives one attack of a hostile agent or
tenant through the public API and shows it fails. `api` is the in-process app of tests/api (no
engine); `engine_api` is a module-wide app on the real Docker engine (tests/docker's)."""
from __future__ import annotations

import pytest_asyncio

from tests.api.conftest import api, llm, other_tenant_key, runner, settings, slack  # noqa: F401
from tests.support.api import Api, start_api, stop_api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def engine_api(stock_images) -> Api:
    """A daemon app on the real engine for the whole module; its shutdown destroys what is left."""
    instance = await start_api()
    yield instance
    await stop_api(instance)
