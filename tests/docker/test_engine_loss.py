"""The engine lost in the middle of an experiment whose agents all pass, and back: the experiment
ends `pass`, the interrupted replicas shown as retried infrastructure errors, none scored `fail`.

The shared dockerd is never stopped: this test's daemon reaches the engine through a Unix-socket
proxy the test controls (tests/support/engine_proxy.py, DOCKER_HOST). Losing the engine is the
proxy dropping every connection (the agents' exec streams included) and answering 500 to new
ones, while the test stops this daemon's own agent containers from outside through the real
socket, as a dockerd restart does to them; then the proxy lets traffic through again.
"""
from __future__ import annotations

import asyncio

import docker
import pytest

from daemon.experiments import service as experiment_service
from tests.support.api import start_api, stop_api
from tests.support.engine_proxy import REAL_SOCKET, EngineProxy
from tests.support.specs import tiny_spec
from tests.support.waiting import wait_for

OUTAGE_S = 3.0
AGENT = "sleep 6; echo ok > ok.txt"  # every agent passes, given the time


@pytest.fixture
async def engine(tmp_path, monkeypatch, stock_images):
    proxy = await EngineProxy.start(tmp_path / "docker.sock")
    monkeypatch.setenv("DOCKER_HOST", proxy.url)
    monkeypatch.setattr(experiment_service, "INFRA_RETRY_S", 1.0)
    yield proxy
    await proxy.close()


@pytest.fixture
async def api(engine):
    instance = await start_api()
    yield instance
    engine.restore()
    await stop_api(instance)


async def agents_running(api, real: docker.APIClient, n: int) -> list[str]:
    """Ids of this daemon's agent containers once `n` are running (their sandboxes are ready)."""
    response, page = await api.get("/v1/sandboxes", params={"state": "ready"})
    ids = {s["id"] for s in page.get("items", [])}
    containers = [c for c in await asyncio.to_thread(real.containers, filters={"label": "svc.role=agent"})
                  if c["Labels"].get("svc.sandbox") in ids]
    return [c["Id"] for c in containers] if len(containers) >= n else []


async def test_an_engine_lost_mid_experiment_ends_pass_with_the_interrupted_runs_retried(api, engine):
    spec = tiny_spec("steady", AGENT, replicas=4, matrix=[{"mode": "good"}])
    await api.upload_doc(spec)
    response, created = await api.post("/v1/experiments", json={"name": "steady", "spec_id": "steady", "concurrency": 2})
    assert response.status == 201, created
    await api.post(f"/v1/experiments/{created['id']}/run")
    real = docker.APIClient(base_url=f"unix://{REAL_SOCKET}")
    victims = await wait_for(lambda: agents_running(api, real, 2), timeout=180, what="two agents running", interval=0.3)

    await engine.cut()
    for container in victims:  # what a dockerd restart does to the containers it ran
        await asyncio.to_thread(real.kill, container)
    await asyncio.sleep(OUTAGE_S)
    engine.restore()

    async def finished():
        response, body = await api.get(f"/v1/experiments/{created['id']}")
        return body if body["status"] in ("completed", "failed", "cancelled") else None

    results = await wait_for(finished, timeout=300, what="the experiment to finish", interval=0.5)
    [scenario] = results["scenarios"]
    earlier = [run_id for r in scenario["runs"] for run_id in r["previous_run_ids"]]
    statuses = []
    for run_id in earlier:
        response, run = await api.get(f"/v1/runs/{run_id}")
        statuses.append((run.get("status"), run.get("reason")) if response.status == 200 else ("no run row", None))
    replicas = [(r["status"], r["reason"], r["error"]) for r in scenario["runs"]]
    assert scenario["verdict"] == "pass" and scenario["failed_runs"] == 0, (replicas, statuses)
    assert scenario["retried_runs"] >= 2 and all(status != "failed" for status, _ in statuses)
    # ... and a clean stop leaves nothing of this daemon on the engine, although containers were
    # created and killed while the engine was away
    daemon_id = api.manager.settings.daemon_id
    await api.client.close()
    label = f"svc.daemon={daemon_id}"
    left = await asyncio.to_thread(real.containers, all=True, filters={"label": label})
    networks = await asyncio.to_thread(real.networks, filters={"label": label})
    assert ([c["Names"] for c in left], [n["Name"] for n in networks]) == ([], [])
