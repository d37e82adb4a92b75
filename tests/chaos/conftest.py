"""The chaos suite (`make chaos`): real-engine faults through the public API, each followed by the
after-checks of tests/support/chaos.py. The shared dockerd is never stopped: an engine fault is a
Unix-socket proxy in front of it (tests/support/engine_proxy.py) that this test's daemon uses.
CI runs them all (the Makefile's ENGINE_TESTS), and so does `make chaos`. This file only holds fixtures."""
from __future__ import annotations

import pytest

from daemon.experiments import service as experiment_service
from tests.support.engine_proxy import EngineProxy
from tests.support.homes import short_dir


@pytest.fixture
def home():
    with short_dir("svc-chaos-") as path:
        yield path


@pytest.fixture
async def engine(home, monkeypatch, stock_images):
    """This test's engine: the shared one through a proxy the test can cut or drop."""
    proxy = await EngineProxy.start(home / "docker.sock")
    monkeypatch.setenv("DOCKER_HOST", proxy.url)
    monkeypatch.setattr(experiment_service, "INFRA_RETRY_S", 1.0)
    yield proxy
    await proxy.close()
