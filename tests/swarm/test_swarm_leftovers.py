"""An agent on a swarm node that ends but leaves processes behind cannot change what is measured
after it, as on the local engine (tests/security/test_agent_leftovers.py): the reaper stops them
before the after-snapshot and the checks. On a node the reaper's exec is skipped only when the node's
engine counts exactly docker-init and the keep-alive in the container (`SwarmDriver.process_count`);
a lone detached writer makes three, so it is still stopped."""
from __future__ import annotations

import pytest

from tests.support.runs import result, run_spec
from tests.support.specs import cli_spec, inv

pytestmark = pytest.mark.asyncio(loop_scope="module")

SEES_LATE = {"late": inv({"type": "file_exists", "path": "late.txt"})}
# the first check takes long enough for a leftover to write, were it still running
SLOW = {"slow": inv({"type": "command_exit", "command": "sleep 3"})}


async def test_a_background_write_after_the_agent_ends_on_a_node_is_not_seen(api):
    script = "(sleep 2; echo late > /workspace/late.txt) >/dev/null 2>&1 & exit 0"
    run = await run_spec(api, cli_spec("swarm-leftover-late", script, {**SLOW, **SEES_LATE}))
    assert result(run, "late")["status"] == "failed", run


async def test_a_lone_detached_writer_on_a_node_is_stopped(api):
    script = "setsid sh -c 'sleep 2; echo late > /workspace/late.txt' >/dev/null 2>&1 < /dev/null & exit 0"
    run = await run_spec(api, cli_spec("swarm-leftover-lone", script, {**SLOW, **SEES_LATE}))
    assert result(run, "late")["status"] == "failed", run


async def test_an_agent_that_leaves_nothing_passes_on_a_node(api):
    run = await run_spec(api, cli_spec("swarm-leftover-none", "echo done > late.txt", SEES_LATE))
    assert run["status"] == "passed", run


async def test_a_drop_file_turned_into_a_directory_does_not_break_the_run(api):
    """The trace drop is the agent's to write: a file brought back live, then replaced by a directory
    of the same name, is skipped when it comes back, not an error of the run."""
    script = ("echo '{}' > /run/svc/traces/spans-1.jsonl; sleep 2.5; rm /run/svc/traces/spans-1.jsonl; "
              "mkdir /run/svc/traces/spans-1.jsonl; echo x > /run/svc/traces/spans-1.jsonl/x; echo done > late.txt")
    run = await run_spec(api, cli_spec("swarm-drop-shape", script, SEES_LATE))
    assert run["status"] == "passed", run
