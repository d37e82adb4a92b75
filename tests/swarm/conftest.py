"""Swarm driver tests: they need the local swarm. `make test` (what CI runs) brings it up, runs them
with the rest and takes it down; `make test-swarm` runs only these. Collected with SVC_SWARM_TESTS=1
or CI=true, never skipped: when the swarm cannot come up, each of them fails naming why."""
from __future__ import annotations

import os

import pytest
import pytest_asyncio

from daemon.sandbox.engine.swarm.driver import SwarmDriver
from tests.support.api import start_api, stop_api
from tests.support.swarm import daemon_overrides, remove_labelled, swarm_up, test_label

WANTED = os.environ.get("SVC_SWARM_TESTS") == "1" or os.environ.get("CI") == "true"
collect_ignore_glob = [] if WANTED else ["test_*.py"]


@pytest.fixture(scope="session")
def swarm():
    try:
        return swarm_up()
    except Exception as exc:
        pytest.fail(f"the local swarm did not come up (swarm/cluster.py up): {exc}", pytrace=False)


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


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(swarm):
    """A daemon app whose sandboxes run on the local swarm, one per module (a module that needs
    other settings defines its own `api`)."""
    instance = await start_api(**daemon_overrides(swarm))
    yield instance
    await stop_api(instance)
