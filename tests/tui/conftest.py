"""TUI tests: the real daemon app served in-process on a Unix socket (in the test's event loop), the
real `client/` talking to it, and the Textual app driven by Pilot. Only the tests import `daemon`
(to start it); the TUI code never does. Helpers live in tests.support.tui; this file only holds
the fixtures."""
from __future__ import annotations

import os

import pytest

from tests.support.tui import served_daemon


@pytest.fixture
async def daemon(tmp_path):
    os.environ.pop("SERVICE_THEME", None)
    async with served_daemon(tmp_path / "home", "svctui") as d:
        yield d


@pytest.fixture
async def api(daemon):
    client = daemon.client()
    try:
        yield client
    finally:
        await client.close()
