"""In-agent traces from a swarm node (issue 39): an agent using the shipped SDK (svc_tracing) on a
node, where no daemon socket reaches, has its spans in the run's trace, stamped with the run, and
a run secret it wrote into a span stored redacted, as from a sandbox on this host."""
from __future__ import annotations

import pytest

from tests.support.runs import cli_spec, inv, run_spec

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
