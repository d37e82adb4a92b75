"""Swarm driver tests: they need the local swarm (`make test-swarm` brings it up and runs them).
Not part of `pytest tests`: collected only with SVC_SWARM_TESTS=1 (a CI test that needs the swarm
must fail, never skip, so it is either wired into CI or not collected at all)."""
from __future__ import annotations

import os

import pytest
import pytest_asyncio

from daemon.sandbox.swarm.driver import SwarmDriver
from tests.support.swarm import remove_labelled, swarm_up, test_label

collect_ignore_glob = [] if os.environ.get("SVC_SWARM_TESTS") == "1" else ["test_*.py"]


@pytest.fixture(scope="session")
def swarm():
    return swarm_up()


@pytest.fixture
def labels(swarm):
    labels = test_label()
    yield labels
    remove_labelled(swarm, labels)


@pytest_asyncio.fixture
async def driver(swarm):
    instance = SwarmDriver(swarm, place_timeout_s=5.0)
    yield instance
    await instance.close()
