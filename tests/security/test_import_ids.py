"""Attack: a tenant imports a baseline bundle (POST /v1/experiments/import) naming another tenant's
run ids, hoping the daemon joins that tenant's trace events to the imported experiment. The import
gives every run a new id (the named one is kept as `imported_run_id`), so nothing of the other
tenant's runs shows."""
from __future__ import annotations

import asyncio
import copy

import pytest

from tests.support.experiments import run_experiment, start
from tests.support.specs import spec_yaml


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner):
    return await start(aiohttp_client, tmp_path / "home", runner)


async def run_as(api, key: str, spec_id: str) -> dict:
    await api.upload_yaml(spec_yaml(spec_id), key=key)
    _, created = await api.post("/v1/experiments", json={"name": spec_id, "spec_id": spec_id}, key=key)
    await api.post(f"/v1/experiments/{created['id']}/run", key=key)
    for _ in range(500):
        _, body = await api.get(f"/v1/experiments/{created['id']}", key=key)
        if body["status"] == "completed":
            return body
        await asyncio.sleep(0.02)
    raise AssertionError("the other tenant's experiment did not finish")


async def test_an_imported_bundle_cannot_name_another_tenants_runs(api, other_tenant_key):
    victim_run = (await run_as(api, other_tenant_key, "victim"))["scenarios"][0]["runs"][0]
    await api.upload_yaml(spec_yaml("mine"))
    mine = await run_experiment(api, name="mine", spec_id="mine")
    _, spec = await api.get("/v1/specs/mine")
    bundle = {"format": "svc-baseline-bundle", "version": 1, "exported_at": "2026-11-26T00:00:00Z", "experiment": copy.deepcopy(mine),
              "spec": {"id": "mine", "version": spec["version"], "digest": spec["sha256"], "yaml": spec["yaml"]}}
    bundle["experiment"]["scenarios"][0]["runs"][0]["run_id"] = victim_run["run_id"]
    response, imported = await api.post("/v1/experiments/import", json=bundle)
    run = imported["scenarios"][0]["runs"][0]
    assert victim_run["trace_ids"] and response.status == 201, imported
    assert run["run_id"] != victim_run["run_id"] and run["trace_ids"] == [] and imported["scenarios"][0]["trace_ids"] == []
