"""TUI tests: the real daemon app served in-process on a Unix socket (in the test's event loop), the
real `client/` talking to it, and the Textual app driven by Pilot. Only the tests import `daemon`
(to start it); the TUI code never does. Helpers live in tests.support.tui; this file only holds
the fixtures."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.support.homes import short_home
from tests.support.tui import Daemon


@pytest.fixture
async def daemon(tmp_path):
    short = short_home("svctui")  # Unix socket paths must stay short
    d = Daemon(tmp_path / "home", short / "s.sock")
    os.environ.pop("SERVICE_THEME", None)
    await d.start()
    try:
        yield d
    finally:
        await d.stop()
        shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
async def api(daemon):
    client = daemon.client()
    try:
        yield client
    finally:
        await client.close()
