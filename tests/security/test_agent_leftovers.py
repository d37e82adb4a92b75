"""An agent that ends but leaves processes behind cannot change what is measured after it: the
after-snapshot, the checks, `expected.json` and the last db drain all come after its leftovers are
stopped (daemon/sandbox/leftovers.py)."""
from __future__ import annotations

import pytest

from tests.support.runs import cli_spec, inv, result, run_spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

# detached from the exec's output, so the exec (the agent) ends at once and the subshell lives on
LATE_WRITE = "(sleep 2; echo late > /workspace/late.txt; echo pwn > /etc/x) >/dev/null 2>&1 & exit 0"
SEES_LATE = {"late": inv({"type": "file_exists", "path": "late.txt"})}


async def test_a_background_write_after_the_agent_ends_is_not_seen(engine_api):
    # the first check takes long enough for the leftover to write, were it still running
    doc = cli_spec("leftover-late-write", LATE_WRITE, {"slow": inv({"type": "command_exit", "command": "sleep 3"}), **SEES_LATE})
    run = await run_spec(engine_api, doc)
    assert result(run, "late")["status"] == "failed", run


async def test_a_lone_detached_writer_is_stopped_although_it_is_the_only_leftover(engine_api):
    """One process re-parented to docker-init (its own session, the shell that started it gone): the
    container then runs three, so the host's count does not skip the reaper (commands.nothing_left)."""
    script = "setsid sh -c 'sleep 2; echo late > /workspace/late.txt' >/dev/null 2>&1 < /dev/null & exit 0"
    doc = cli_spec("leftover-lone", script, {"slow": inv({"type": "command_exit", "command": "sleep 3"}), **SEES_LATE})
    run = await run_spec(engine_api, doc)
    assert result(run, "late")["status"] == "failed", run


async def test_keep_running_leaves_a_server_the_checks_need(engine_api):
    script = "nohup python3 -m http.server 8000 >/dev/null 2>&1 & sleep 1"
    doc = cli_spec("leftover-kept", script,
                   {"served": inv({"type": "command_exit", "command": "python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:8000/')\""})})
    doc["agent"]["keep_running"] = True
    run = await run_spec(engine_api, doc)
    assert run["status"] == "passed", run
