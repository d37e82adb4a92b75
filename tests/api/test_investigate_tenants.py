"""Every investigation tool that takes an id reads only the asking tenant's data: the admin tenant's
failed experiment and its run are found by the admin's agent and answer "not found" (or nothing)
to another tenant's agent, exactly like ids that do not exist."""
from __future__ import annotations

import json

import pytest

from daemon.app import create_app
from tests.support.api import api_on, make_settings
from tests.support.experiments import run_experiment, upload
from tests.support.openai_server import Reply, tool_call
from tests.support.specs import spec_yaml
from daemon.appkeys import RUN_SCENARIO, STORE

# tool -> its arguments, given the experiment and run ids
TOOL_ARGUMENTS = {
    "get_experiment": lambda exp, run: {"experiment_id": exp},
    "failing_scenarios": lambda exp, run: {"experiment_id": exp},
    "get_scores": lambda exp, run: {"experiment_id": exp},
    "compare_experiments": lambda exp, run: {"baseline_id": exp, "candidate_id": exp},
    "get_run": lambda exp, run: {"run_id": run},
    "get_reproducer": lambda exp, run: {"run_id": run},
}


@pytest.fixture
async def api(aiohttp_client, tmp_path, llm, runner):
    app = create_app(make_settings(tmp_path / "home", llm_base_url=llm.url))
    app[RUN_SCENARIO] = runner
    return await api_on(aiohttp_client, app)


@pytest.fixture
async def admin_failure(api) -> tuple[str, str]:
    """(experiment id, run id) of the admin tenant's failed experiment."""
    await upload(api, spec_yaml(matrix=[{"mode": "fail"}]))
    experiment = await run_experiment(api, name="admin-nightly", spec_id="demo")
    store = api.app[STORE]
    scenario = await store.fetchone("SELECT id, tenant_id FROM scenarios WHERE experiment_id = ?", (experiment["id"],))
    # The fake scenario runner keeps no run rows: the failed run a real engine records, with its RunResult.
    result = {"invariant_results": [{"id": "wrote", "status": "failed", "evidence": "no hello.txt"}],
              "reproducer": "svc runs replay run-admin-1"}
    await store.execute(
        "INSERT INTO runs (id, tenant_id, spec_id, spec_version, status, verdict, seed, experiment_id, scenario_id, result, created_at)"
        " VALUES ('run-admin-1', ?, 'demo', 1, 'failed', 'fail', 's', ?, ?, ?, '2026-11-23T00:00:00Z')",
        (scenario["tenant_id"], experiment["id"], scenario["id"], json.dumps(result)))
    return experiment["id"], "run-admin-1"


async def tool_answer(api, llm, tool: str, arguments: dict, key: str | None = None) -> str:
    """What the tool answered the model when the agent of `key`'s tenant called it."""
    llm.script(Reply(tool_calls=[tool_call(tool, arguments)]), Reply(content="done"))
    _, conversation = await api.post("/v1/conversations", json={"title": "t"}, key=key)
    response, body = await api.post(f"/v1/conversations/{conversation['id']}/messages", json={"content": "look"}, key=key)
    assert response.status == 201, body
    return next(m["content"] for m in llm.requests[-1]["body"]["messages"] if m["role"] == "tool")


@pytest.mark.parametrize("tool", sorted(TOOL_ARGUMENTS))
async def test_the_admins_agent_finds_its_own_failure(api, llm, admin_failure, tool):
    answer = await tool_answer(api, llm, tool, TOOL_ARGUMENTS[tool](*admin_failure))
    assert "not found" not in answer


@pytest.mark.parametrize("tool", sorted(TOOL_ARGUMENTS))
async def test_another_tenants_agent_gets_not_found(api, llm, admin_failure, other_tenant_key, tool):
    answer = await tool_answer(api, llm, tool, TOOL_ARGUMENTS[tool](*admin_failure), key=other_tenant_key)
    assert "not found" in answer


async def test_another_tenants_agent_finds_no_spans_of_the_admins_run(api, llm, admin_failure, other_tenant_key):
    response, _ = await api.post("/v1/traces", json={"events": [{"event_type": "llm_call", "trace_id": "trace-admin",
                                                                 "run_id": admin_failure[1], "input": "admin prompt"}]})
    assert response.status == 202
    mine = await tool_answer(api, llm, "find_spans", {"run_id": admin_failure[1]})
    theirs = await tool_answer(api, llm, "find_spans", {"run_id": admin_failure[1]}, key=other_tenant_key)
    assert (len(json.loads(mine)["spans"]), json.loads(theirs)["spans"]) == (1, [])
