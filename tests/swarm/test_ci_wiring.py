"""In CI the swarm tests fail, never skip, when the local swarm cannot come up: a pytest run of one
of them with CI=true and a `docker` that does not answer ends in an error naming the cause."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.support.swarm import ROOT


def test_swarm_test_fails_in_ci_when_the_swarm_cannot_come_up(tmp_path):
    stub = tmp_path / "docker"
    stub.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    stub.chmod(0o755)
    env = {**os.environ, "CI": "true", "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    env.pop("SVC_SWARM_TESTS", None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
                        "tests/swarm/test_swarm_driver.py::test_capacity_sums_every_node"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    summary = p.stdout.strip().splitlines()
    assert "does not answer" in p.stdout and summary[-1].startswith("1 error"), p.stdout[-2000:]
