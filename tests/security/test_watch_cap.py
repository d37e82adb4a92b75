"""One sandbox cannot use up the host's inotify watches (every sandbox's file audit shares the
daemon's pool): it holds at most SERVICE_FS_WATCHES_PER_SANDBOX, and a directory it makes past
that leaves its own file audit incomplete, so the run is not scored on it."""
from __future__ import annotations

import os

import pytest

from tests.support.runs import cli_spec, inv, run_spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

MANY_DIRS = "for i in $(seq 40); do mkdir -p d$i; done; sleep 1; echo hidden > d40/secret.txt; touch done.txt"


async def test_a_sandbox_past_its_watches_is_not_scored_on_its_file_audit(engine_api):
    doc = cli_spec("watch-cap", MANY_DIRS, {"done": inv({"type": "file_exists", "path": "done.txt"})},
                   audit={"file_system": {"watch": ["/workspace"], "track": ["writes"]}})
    os.environ["SERVICE_FS_WATCHES_PER_SANDBOX"] = "20"
    try:
        run = await run_spec(engine_api, doc)
    finally:
        del os.environ["SERVICE_FS_WATCHES_PER_SANDBOX"]
    assert run["status"] == "errored" and "audit" in (run.get("reason") or ""), run
