"""End-to-end: a real svcd subprocess with its own home, reached over its Unix socket (`home`), or
the daemon app served in this event loop over TCP for CLI subprocesses (`daemon`). Helpers live in
tests.support.procs and tests.support.cli; this file only holds the fixtures."""
from __future__ import annotations

import shutil

import pytest

from tests.support.api import start_api, stop_api
from tests.support.homes import short_home
from tests.support.procs import run_svc
from tests.support.wheels import svc_venv


@pytest.fixture
def home(tmp_path):
    short = short_home("svc-e2e-")  # Unix socket paths are limited to ~107 bytes
    yield short
    run_svc(short, "daemon", "stop")
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
async def daemon():
    api = await start_api()
    yield api
    await stop_api(api)


@pytest.fixture(scope="session")
def installed_svc(tmp_path_factory):
    """One fresh venv holding the svc wheel and its dependencies, for every test module that needs it
    (read-only: a test that upgrades svc works on a linked copy)."""
    return svc_venv(tmp_path_factory.mktemp("svc-installed") / "venv")
