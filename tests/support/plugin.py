"""The pytest plugin for tests.support (loaded from tests/conftest.py): fixtures several test
directories share. Directory fixtures stay in their thin conftest.py files."""
from __future__ import annotations

import pytest

from tests.support.tracing import fake_provider


@pytest.fixture
async def provider(aiohttp_server):
    """A fake OpenAI + Anthropic API. Requests are recorded; model 'explode' answers 500."""
    return await fake_provider(aiohttp_server)
