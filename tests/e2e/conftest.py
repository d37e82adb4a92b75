"""End-to-end: a real svcd subprocess with its own home, reached over its Unix socket.
Helpers live in tests.support.procs; this file only holds the fixture."""
from __future__ import annotations

import shutil

import pytest

from tests.support.homes import short_home
from tests.support.procs import run_svc


@pytest.fixture
def home(tmp_path):
    short = short_home("svc-e2e-")  # Unix socket paths are limited to ~107 bytes
    yield short
    run_svc(short, "daemon", "stop")
    shutil.rmtree(short, ignore_errors=True)
