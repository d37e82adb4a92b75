"""Scheduler persistence across daemon restarts, in-process (two apps on one SERVICE_HOME).

A SIGKILL leaves jobs `running` in the store; here that state is produced by stopping the first
app and marking jobs the way a killed daemon leaves them. tests/docker/test_experiments.py does it
for real with a SIGKILLed svcd subprocess.
"""
from __future__ import annotations

import asyncio

from daemon.store.db import Store
from tests.support.experiments import FakeRunner, start, upload, wait_done
from tests.support.specs import spec_yaml
from tests.support.sse import sse_data


async def stop(api) -> None:
    await api.client.close()


async def test_killed_daemon_retries_running_once_then_errors_and_resumes_queued(aiohttp_client, tmp_path):
    home = tmp_path / "home"
    first = FakeRunner()
    api = await start(aiohttp_client, home, first)
    await upload(api, spec_yaml(matrix=[{"mode": "block"}], replicas=5))
    response, created = await api.post("/v1/experiments", json={"name": "long", "spec_id": "demo", "concurrency": 2})
    await api.post(f"/v1/experiments/{created['id']}/run")
    await asyncio.wait_for(first.started.wait(), 5)
    await stop(api)

    # What a SIGKILL leaves: two jobs running (one on its first attempt, one already retried once).
    store = await Store.open(home / "svc.db")
    jobs = await store.fetchall("SELECT * FROM scenario_jobs WHERE group_id = ? ORDER BY replica_index", (created["id"],))
    assert [j["state"] for j in jobs] == ["queued"] * 5  # a graceful stop put the running ones back
    await store.execute("UPDATE scenario_jobs SET state = 'running', attempts = 1 WHERE id = ?", (jobs[0]["id"],))
    await store.execute("UPDATE scenario_jobs SET state = 'running', attempts = 2 WHERE id = ?", (jobs[1]["id"],))
    await store.close()

    second = FakeRunner()
    second.release.set()
    api = await start(aiohttp_client, home, second)
    results = await wait_done(api, created["id"])
    runs = results["scenarios"][0]["runs"]
    assert results["status"] == "completed" and results["completed_runs"] == 5
    assert runs[0]["status"] == "passed" and runs[0]["attempts"] == 2
    assert runs[0]["previous_run_ids"] == [jobs[0]["run_id"]] and runs[0]["run_id"] != jobs[0]["run_id"]
    assert runs[0]["seed"] == jobs[0]["seed"]  # same replica, same seed
    assert runs[1]["status"] == "errored" and runs[1]["error"].startswith("daemon_restart")
    assert [r["status"] for r in runs[2:]] == ["passed"] * 3
    # Nothing lost, nothing run twice: the retried job and the three queued ones ran exactly once.
    assert sorted(c["seed"] for c in second.calls) == sorted([jobs[0]["seed"]] + [j["seed"] for j in jobs[2:]])
    assert results["scenarios"][0]["verdict"] == "flaky"


async def test_graceful_stop_does_not_count_an_attempt(aiohttp_client, tmp_path):
    home = tmp_path / "home"
    first = FakeRunner()
    api = await start(aiohttp_client, home, first)
    await upload(api, spec_yaml(matrix=[{"mode": "block"}], replicas=2))
    response, created = await api.post("/v1/experiments", json={"name": "g", "spec_id": "demo"})
    await api.post(f"/v1/experiments/{created['id']}/run")
    await asyncio.wait_for(first.started.wait(), 5)
    await stop(api)
    second = FakeRunner()
    second.release.set()
    api = await start(aiohttp_client, home, second)
    results = await wait_done(api, created["id"])
    assert [r["attempts"] for r in results["scenarios"][0]["runs"]] == [1, 1]
    assert [r["status"] for r in results["scenarios"][0]["runs"]] == ["passed", "passed"]


async def test_secrets_lost_in_a_restart_error_the_scenario_naming_the_secret(aiohttp_client, tmp_path):
    home = tmp_path / "home"
    first = FakeRunner()
    api = await start(aiohttp_client, home, first)
    await upload(api, spec_yaml(matrix=[{"mode": "block"}], replicas=3, extra="secrets:\n  API_TOKEN: env\n"))
    response, created = await api.post("/v1/experiments", json={"name": "s", "spec_id": "demo", "concurrency": 1,
                                                                "secrets": {"API_TOKEN": "value"}})
    await api.post(f"/v1/experiments/{created['id']}/run")
    await asyncio.wait_for(first.started.wait(), 5)
    await stop(api)
    second = FakeRunner()
    second.release.set()
    api = await start(aiohttp_client, home, second)
    results = await wait_done(api, created["id"])
    assert second.calls == []
    assert results["status"] == "completed" and results["scenarios"][0]["verdict"] == "error"
    for run in results["scenarios"][0]["runs"]:
        assert run["status"] == "errored"
        assert "secret 'API_TOKEN'" in run["error"] and "restarted" in run["error"]


async def test_replica_stream_after_restart_replays_and_finishes(aiohttp_client, tmp_path):
    home = tmp_path / "home"
    first = FakeRunner()
    api = await start(aiohttp_client, home, first)
    await upload(api, spec_yaml())
    response, suite = await api.post("/v1/replicas", json={"spec_id": "demo", "n_replicas": 4, "inputs": {"mode": "block"}})
    await asyncio.wait_for(first.started.wait(), 5)
    await stop(api)
    store = await Store.open(home / "svc.db")
    # One replica had finished before the kill.
    await store.execute(
        "UPDATE scenario_jobs SET state = 'done', status = 'passed', score = 1.0, finished_at = 'x', done_seq = 1, attempts = 1"
        " WHERE group_id = ? AND replica_index = 0", (suite["id"],))
    await store.close()
    second = FakeRunner()
    second.release.set()
    api = await start(aiohttp_client, home, second)
    response = await api.client.get(f"/v1/replicas/{suite['id']}/stream", headers=api.headers())
    events = sse_data(await response.text())
    assert sorted(e["index"] for e in events if e["type"] == "replica") == [0, 1, 2, 3]
    assert events[-1]["type"] == "done" and events[-1]["suite"]["passed"] == 4
    assert len(second.calls) == 3


async def test_an_experiment_whose_spec_vanished_fails(aiohttp_client, tmp_path):
    home = tmp_path / "home"
    first = FakeRunner()
    api = await start(aiohttp_client, home, first)
    await upload(api, spec_yaml(matrix=[{"mode": "block"}], replicas=3))
    response, created = await api.post("/v1/experiments", json={"name": "doomed", "spec_id": "demo", "concurrency": 1})
    response, never = await api.post("/v1/experiments", json={"name": "never", "spec_id": "demo"})
    await api.post(f"/v1/experiments/{created['id']}/run")
    await asyncio.wait_for(first.started.wait(), 5)
    response, _ = await api.delete("/v1/specs/demo")
    assert response.status == 204
    # Not started yet: running it now is a conflict, and it is failed for good.
    response, body = await api.post(f"/v1/experiments/{never['id']}/run")
    assert response.status == 409 and body["details"]["state"] == "failed" and "no longer exists" in body["message"]
    await stop(api)
    # After a restart the running one cannot load its spec version either: failed, not lost.
    api = await start(aiohttp_client, home, FakeRunner())
    results = await wait_done(api, created["id"])
    assert results["status"] == "failed" and "spec 'demo' version 1 no longer exists" in results["error"]
    assert results["scenarios"][0]["status"] == "cancelled"
