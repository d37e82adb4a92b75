"""An agent posts trace events that name another run (run_id, experiment_id, scenario_id in the body)
with its sandbox token: the daemon stamps those ids from the sandbox's own records and ignores the
body's, so an agent cannot file events under another run (daemon/traces/sandbox_events.py sandbox_stamps)."""
from __future__ import annotations

import json

from daemon import auth
from daemon.appkeys import DEFAULT_TENANT_ID, STORE
from tests.support.store import add_sandbox

OWN = {"run_id": "run_own", "experiment_id": "exp_own", "scenario_id": "sc_own"}
FORGED = {"run_id": "run_victim", "experiment_id": "exp_victim", "scenario_id": "sc_victim"}


async def test_a_sandbox_token_cannot_file_events_under_another_run(api):
    await add_sandbox(api, "sbx_agent")
    await api.app[STORE].execute("UPDATE sandboxes SET metadata = ? WHERE id = ?", (json.dumps(OWN), "sbx_agent"))
    token = await auth.create_sandbox_token(api.app[STORE], api.app[DEFAULT_TENANT_ID], "sbx_agent")
    response, body = await api.post("/v1/sandboxes/sbx_agent/trace", key=token,
                                    json={"events": [{"event_type": "tool_call", "tool": "ls", **FORGED}]})
    assert response.status == 202, body
    _, page = await api.get("/v1/traces?sandbox_id=sbx_agent")
    assert [{k: e[k] for k in OWN} for e in page["items"]] == [OWN]
