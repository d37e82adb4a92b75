"""Sandbox tests against the real Docker engine: an in-process daemon app (real store, real HTTP
stack, real containers) per module, so read-only assertions can share one booted sandbox.
Helpers live in tests.support (api, specs, engine, runs); this file only holds the fixtures.

Modules using these fixtures set `pytestmark = pytest.mark.asyncio(loop_scope="module")`.
"""
from __future__ import annotations

import pytest_asyncio

from tests.support.api import Api, start_api, stop_api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(stock_images) -> Api:
    """A daemon app for the whole module; its shutdown destroys whatever sandboxes are left."""
    instance = await start_api()
    yield instance
    await stop_api(instance)
