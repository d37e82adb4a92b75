"""Shared test configuration.

- Tests under ``tests/docker/`` get the ``docker`` marker automatically.
- ``docker_client``: a real engine, or skip (locally) / fail (``CI=true``).
- ``stock_images``: the stock sandbox images exist (built when missing).

Keep this file minimal: suites add their own thin conftest.py (fixtures only) in subdirectories;
shared helpers live in the ``tests.support`` package, loaded here as a plugin.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_DOCKER_DIR = Path(__file__).parent / "docker"

pytest_plugins = ["tests.support.plugin"]


def _in_ci() -> bool:
    return os.environ.get("CI") == "true"


def _no_engine(reason: str) -> None:
    msg = f"no usable Docker engine: {reason}"
    if _in_ci():
        pytest.fail(msg + " (CI=true: start it with .ci/docker.sh)", pytrace=False)
    pytest.skip(msg)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _DOCKER_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def docker_client():
    """``docker.from_env()`` after a successful ``ping()``."""
    try:
        import docker
    except ImportError as e:  # pragma: no cover - docker is a dependency
        _no_engine(f"the docker SDK is not installed ({e})")
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as e:  # DockerException, connection errors, ...
        _no_engine(f"{type(e).__name__}: {e}")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def stock_images(docker_client) -> list[str]:
    """Names of the stock images, built first if missing or outdated."""
    from daemon.sandbox.images import STOCK_IMAGES, ImageBuildError, ensure_stock_images

    try:
        ensure_stock_images(log=lambda msg: print(f"[stock images] {msg}"))
    except ImageBuildError as e:
        if _in_ci():
            pytest.fail(f"cannot build the stock images: {e}", pytrace=False)
        pytest.skip(f"cannot build the stock images: {e}")
    return list(STOCK_IMAGES)
