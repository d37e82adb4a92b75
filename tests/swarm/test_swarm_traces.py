"""In-agent traces from a swarm node (issue 39): an agent using the shipped SDK (svc_tracing) on a
node, where no daemon socket reaches, has its spans in the run's trace, stamped with the run, and
a run secret it wrote into a span stored redacted, as from a sandbox on this host; its spans show
while it still runs; a command in a sandbox made through the API has its spans stored too; a drop
grown too big to follow live still comes back when the agent ends."""
from __future__ import annotations

import pytest

from tests.support.runs import run_spec, start_run, wait_run, wait_run_in_sandbox
from tests.support.specs import cli_spec, inv
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "node-secret-4f1c9a7e2b"
AGENT = """python3 - <<'PY'
import os
from svc_tracing import trace

@trace(name="solve-on-node")
def solve(token):
    open("out.txt", "w").write("ok")
    return "used " + token

solve(os.environ["API_TOKEN"])
PY"""


async def test_an_agents_spans_on_a_node_reach_the_runs_trace_redacted(api):
    doc = cli_spec("swarm-traces", AGENT, {"wrote": inv({"type": "file_exists", "path": "out.txt"})},
                   secrets={"API_TOKEN": "env"})
    run = await run_spec(api, doc, secrets={"API_TOKEN": SECRET})
    response, page = await api.get(f"/v1/traces?run_id={run['id']}")
    spans = [e for e in page["items"] if e.get("tool") == "solve-on-node"]
    outputs = [str(e.get("output")) for e in spans if e.get("output") is not None]
    assert (run["status"], response.status, len(spans), {e["sandbox_id"] for e in spans} == {run["sandbox_id"]},
            any(SECRET in o for o in outputs), any("used" in o for o in outputs)) == \
        ("passed", 200, 2, True, False, True), (run, page["items"])


LIVE_AGENT = """python3 - <<'PY'
import time
from svc_tracing import trace

@trace(name="live-on-node")
def step():
    return "first step done"

step()
time.sleep(15)
open("out.txt", "w").write("ok")
PY"""


async def test_an_agents_spans_on_a_node_show_while_it_still_runs(api):
    doc = cli_spec("swarm-traces-live", LIVE_AGENT, {"wrote": inv({"type": "file_exists", "path": "out.txt"})})
    run = await start_run(api, (await api.upload_doc(doc))["id"])
    run = await wait_run_in_sandbox(api, run["id"], timeout=90)

    async def span_and_run_status():
        _, page = await api.get(f"/v1/sandboxes/{run['sandbox_id']}/trace?limit=100")
        if not any(e.get("tool") == "live-on-node" for e in page.get("items", [])):
            return None
        _, now = await api.get(f"/v1/runs/{run['id']}")
        return now["status"]

    status_when_seen = await wait_for(span_and_run_status, timeout=30, what="the agent's span", interval=0.5)
    await wait_run(api, run["id"])
    assert status_when_seen == "running"


async def test_spans_from_a_command_in_a_sandbox_on_a_node_are_stored_without_a_run(api):
    doc = cli_spec("swarm-traces-sandbox", "true", {"wrote": inv({"type": "file_exists", "path": "out.txt"})})
    sandbox = await api.create_from_spec(doc)
    command = "python3 -c 'from svc_tracing import trace; trace(name=\"by-hand\")(lambda: 1)()'"
    result = await api.run(sandbox["id"], command, timeout="60s")

    async def spans():
        _, page = await api.get(f"/v1/sandboxes/{sandbox['id']}/trace?limit=100")
        return [e for e in page.get("items", []) if e.get("tool") == "by-hand"] or None

    try:
        found = await wait_for(spans, timeout=15, what="the command's span", interval=0.5)
        assert (result["exit_code"], len(found)) == (0, 2), (result, found)
    finally:
        await api.delete(f"/v1/sandboxes/{sandbox['id']}")


JUNK_AGENT = """python3 - <<'PY'
from svc_tracing import trace

with open("/run/svc/traces/spans-1.jsonl", "w") as junk:  # 12 MiB of lines that are no batch
    for _ in range(12 * 1024):
        junk.write("x" * 1023 + "\\n")

@trace(name="after-the-junk")
def solve():
    open("out.txt", "w").write("ok")

solve()
PY"""


async def test_a_drop_too_big_to_follow_live_still_comes_back_at_the_agents_end(api):
    doc = cli_spec("swarm-traces-junk", JUNK_AGENT, {"wrote": inv({"type": "file_exists", "path": "out.txt"})})
    run = await run_spec(api, doc)
    _, page = await api.get(f"/v1/traces?run_id={run['id']}")
    spans = [e for e in page["items"] if e.get("tool") == "after-the-junk"]
    assert (run["status"], len(spans)) == ("passed", 2), (run, page["items"])
