"""A tenant's http_mock cannot make svcd read host files (daemon/sandbox/commands.py mock_requests):
a mock whose image or command the tenant chose gets no host directory, and a record is only ever
read as a regular file, without following links, up to a cap."""
from __future__ import annotations

import json
import os

import pytest

from tests.support.runs import cli_spec, inv, result, run_spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

MOCK_PROGRAM = "python3 -u /svc-programs/http_mock.py"


def mock_spec(spec_id: str, plant: str) -> dict:
    """A recording mock whose own command plants `plant` at its record's path once it runs."""
    command = f"mkdir -p /svc-mock && (sleep 1; {plant}) & exec {MOCK_PROGRAM}"
    return cli_spec(spec_id, "true", {"calls": inv({"type": "http_mock_assertions", "service": "pay",
                                                    "assertions": [{"method": "GET", "path": "/x", "count": 0}]})},
                    services=[{"name": "pay", "type": "http_mock", "record": True, "command": ["sh", "-c", command]}])


async def test_a_link_to_a_root_only_host_file_is_never_read(engine_api, tmp_path):
    secret = tmp_path / "root-only.jsonl"
    secret.write_text(json.dumps({"method": "GET", "path": "/x", "host_secret": "hs-5b1e0c"}) + "\n")
    os.chmod(secret, 0o600)
    doc = mock_spec("mock-link", f"ln -sf {secret} /svc-mock/requests.jsonl")
    doc["agent"]["args"] = ["-c", "sleep 2"]
    run = await run_spec(engine_api, doc)
    response = await engine_api.client.get(run["trajectory_url"], headers={"Authorization": f"Bearer {engine_api.key}"})
    seen = json.dumps(run) + await response.text()
    assert result(run, "calls")["status"] == "passed" and "hs-5b1e0c" not in seen, run


async def test_a_fifo_in_place_of_the_record_does_not_hang_the_check(engine_api):
    doc = mock_spec("mock-fifo", "rm -f /svc-mock/requests.jsonl && mkfifo /svc-mock/requests.jsonl")
    doc["agent"]["args"] = ["-c", "sleep 2"]
    run = await run_spec(engine_api, doc)
    assert result(run, "calls")["status"] == "passed", run
