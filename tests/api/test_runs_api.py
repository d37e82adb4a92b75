"""Runs API without an engine: validation, 404s, tenancy, and restart recovery (a run the daemon
died in is never left running)."""
from __future__ import annotations


from client.config import read_env_file
from daemon.app import create_app
from daemon.runner import records
from daemon.store import jobs as job_store
from daemon.util import now_iso
from tests.support.api import Api
from tests.support.specs import SPEC_YAML
from tests.support.sse import sse_data
from tests.support.waiting import wait_for
from daemon.api.runs import RUNS
from daemon.appkeys import DEFAULT_TENANT_ID, STORE


async def test_unknown_spec_is_404(api):
    response, body = await api.post("/v1/runs", json={"spec_id": "nope"})
    assert response.status == 404 and body["error"] == "not_found" and body["details"] == {"resource": "spec", "id": "nope"}
    await api.upload_yaml(SPEC_YAML, name="hello")
    response, body = await api.post("/v1/runs", json={"spec_id": "hello", "spec_version": 7})
    assert response.status == 404 and "no version 7" in body["message"]


async def test_validation(api):
    response, body = await api.post("/v1/runs", json={})
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "spec_id"
    response, body = await api.post("/v1/runs", json={"spec_id": "hello", "surprise": 1})
    assert response.status == 400
    await api.upload_yaml(SPEC_YAML, name="hello")
    response, body = await api.post("/v1/runs", json={"spec_id": "hello", "sandbox_id": "sb-missing"})
    assert response.status == 404 and body["details"]["resource"] == "sandbox"


async def test_unknown_run_and_other_tenant(api, other_tenant_key):
    for method, path in (("GET", "/v1/runs/run_x"), ("POST", "/v1/runs/run_x/replay"), ("POST", "/v1/runs/run_x/cancel"),
                         ("GET", "/v1/runs/run_x/stream")):
        response, body = await api.call(method, path)
        assert response.status == 404, (method, path, body)
    await api.upload_yaml(SPEC_YAML, name="hello")
    run_id = records.new_run_id()
    await records.insert(api.app[STORE], run_id=run_id, tenant_id=api.app[DEFAULT_TENANT_ID], spec_id="hello",
                         spec_version=1, seed="s1", status="failed")
    response, body = await api.get(f"/v1/runs/{run_id}", key=other_tenant_key)
    assert response.status == 403
    response, listing = await api.get("/v1/runs", key=other_tenant_key)
    assert listing["items"] == []
    response, listing = await api.get("/v1/runs", params={"status": "failed"})
    assert [r["id"] for r in listing["items"]] == [run_id]
    assert listing["items"][0]["reproducer"]["command"] == "svc runs create --spec hello --spec-version 1 --seed s1 --wait"
    response, body = await api.post(f"/v1/runs/{run_id}/cancel")
    assert response.status == 409 and body["details"]["state"] == "failed"


async def test_trajectory_needs_a_valid_signature(api):
    response = await api.client.get("/v1/runs/run_x/trajectory")  # no API key, no signature
    assert response.status == 403 and "expires and sig" in (await response.json())["message"]
    response = await api.client.get("/v1/runs/run_x/trajectory?expires=99999999999&sig=abc")
    assert response.status == 403 and (await response.json())["message"] == "invalid signature"


async def test_restart_marks_running_runs_errored(aiohttp_client, settings):
    first = await aiohttp_client(create_app(settings))
    store = first.server.app[STORE]
    tenant = first.server.app[DEFAULT_TENANT_ID]
    key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
    await Api(first, key).upload_yaml(SPEC_YAML, name="hello")
    await records.insert(store, run_id="run_was_running", tenant_id=tenant, spec_id="hello", spec_version=1, seed="a", status="running")
    await records.insert(store, run_id="run_had_secrets", tenant_id=tenant, spec_id="hello", spec_version=1, seed="b",
                         secret_names=["API_TOKEN"])
    await records.insert(store, run_id="run_spec_gone", tenant_id=tenant, spec_id="gone", spec_version=1, seed="c")
    # the daemon dies here: its runs stay as the store says (no graceful shutdown hook runs)
    await first.server.app[RUNS].close()
    await first.close()

    second = await aiohttp_client(create_app(settings))
    api = Api(second, key)
    response, run = await api.get("/v1/runs/run_was_running")
    assert (run["status"], run["verdict"], run["reason"]) == ("errored", "error", "daemon_restart")
    assert run["error"]["code"] == "daemon_restart"
    response, run = await api.get("/v1/runs/run_had_secrets")
    assert run["status"] == "errored" and "API_TOKEN" in run["error"]["message"]
    async def spec_gone_run():  # requeued, then errored by its worker: the spec is gone
        _, run = await api.get("/v1/runs/run_spec_gone")
        return run if run["status"] == "errored" else None
    run = await wait_for(spec_gone_run, what="run_spec_gone to be errored")
    assert run["status"] == "errored" and run["reason"] == "spec_missing", run


async def test_restart_errors_a_run_its_job_row_says_was_starting(aiohttp_client, settings):
    """Killed between dispatching the run's job and the run row moving to `running`: the job row is
    the engine's record, so the run is errored, not started a second time."""
    first = await aiohttp_client(create_app(settings))
    store = first.server.app[STORE]
    key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
    await Api(first, key).upload_yaml(SPEC_YAML, name="hello")
    await records.insert(store, run_id="run_was_starting", tenant_id=first.server.app[DEFAULT_TENANT_ID], spec_id="hello",
                         spec_version=1, seed="a")
    await job_store.insert_run_job(store, "run_was_starting")
    await job_store.mark_running(store, "run_was_starting", now_iso())
    await first.server.app[RUNS].close()
    await first.close()

    second = await aiohttp_client(create_app(settings))
    response, run = await Api(second, key).get("/v1/runs/run_was_starting")
    assert (run["status"], run["reason"]) == ("errored", "daemon_restart"), run


async def test_stream_of_a_run_finished_long_ago(api):
    await api.upload_yaml(SPEC_YAML, name="hello")
    store = api.app[STORE]
    await records.insert(store, run_id="run_old", tenant_id=api.app[DEFAULT_TENANT_ID], spec_id="hello", spec_version=1, seed="s")
    await records.update(store, "run_old", status="errored", verdict="error", reason="agent_timeout", score=0.5, result={
        "invariant_results": [{"invariant_id": "wrote", "status": "failed"}],
        "forbidden_results": [{"invariant_id": "forbidden.http_except", "status": "passed"}],
        "error": {"step": "agent", "message": "the agent exceeded its timeout", "code": "agent_timeout"},
    })
    response = await api.client.get("/v1/runs/run_old/stream", headers=api.headers())
    assert response.status == 200 and response.headers["Content-Type"] == "text/event-stream"
    events = sse_data(await response.text())
    assert events == [
        {"type": "invariant_result", "invariant_id": "wrote", "status": "failed"},
        {"type": "invariant_result", "invariant_id": "forbidden.http_except", "status": "passed"},
        {"type": "error", "error": "agent_timeout", "message": "the agent exceeded its timeout"},
        {"type": "done", "run_id": "run_old", "status": "errored", "score": 0.5},
    ]
