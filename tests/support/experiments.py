"""Experiments without Docker: a deterministic fake scenario runner (the scheduler's seam,
`app[RUN_SCENARIO]`) and the API helpers the experiment tests share.

The runner's behaviour comes from the matrix entry / inputs `mode`: pass, fail, odd (fails on odd
seeds), error, block (until released or cancelled), hang, capacity (at capacity once, then passes).
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from daemon.app import create_app
from daemon.errors import AtCapacity
from daemon.runner.request import ScenarioRequest
from tests.support.fake_runs import fake_outcome
from daemon.experiments.seeds import derive_seed
from daemon.util import now_iso
from tests.support.api import Api, api_on, make_settings
from daemon.appkeys import STORE
from daemon.appkeys import RUN_SCENARIO


def odd(seed: str) -> bool:
    return int(seed[-1], 16) % 2 == 1


class FakeRunner:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.release = asyncio.Event()
        self.running = 0
        self.peak = 0
        self.capacity_hits: dict[str, int] = {}
        self.started = asyncio.Event()

    async def __call__(self, app, request: ScenarioRequest):
        r = request
        tenant_id, spec_record, run_id, seed = r.tenant_id, r.spec_record, r.run_id, r.seed
        inputs, matrix_entry = r.inputs, r.matrix_entry
        secrets, experiment_id, scenario_id, cancel = r.secrets, r.experiment_id, r.scenario_id, r.cancel
        mode = (matrix_entry or {}).get("mode") or (inputs or {}).get("mode") or "pass"
        if mode == "capacity" and self.capacity_hits.get(seed, 0) == 0:
            self.capacity_hits[seed] = 1
            raise AtCapacity(1)
        self.calls.append({"run_id": run_id, "seed": seed, "inputs": inputs, "matrix_entry": matrix_entry, "secrets": secrets,
                           "experiment_id": experiment_id, "scenario_id": scenario_id, "spec_version": spec_record["version"]})
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.started.set()
        try:
            if mode == "block":
                waiter = asyncio.ensure_future(cancel.wait())
                released = asyncio.ensure_future(self.release.wait())
                await asyncio.wait({waiter, released}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                released.cancel()
                if cancel.is_set():
                    return fake_outcome(request, status="errored", verdict="error", reason="cancelled",
                                        error={"code": "cancelled", "message": "the run was cancelled"})
            elif mode == "hang":
                await asyncio.sleep(3600)
            else:
                await asyncio.sleep(0.01)
            if mode == "error":
                return fake_outcome(request, status="errored", verdict="error", score=0.0, reason="boot_failed",
                                    error={"step": "boot", "code": "boot_failed", "message": "image localhost/nope:1 not found"})
            ok = mode in ("pass", "block", "capacity") or (mode == "odd" and not odd(seed))
            await self._trace(app, tenant_id, run_id, experiment_id, scenario_id, ok)
            return fake_outcome(request, status="passed" if ok else "failed", verdict="pass" if ok else "fail",
                                score=1.0 if ok else 0.0, duration_ms=10,
                                invariant_results=[{"invariant_id": "ok", "name": "ok", "status": "passed" if ok else "failed",
                                                    "score": 1.0 if ok else 0.0}],
                                cost={"total_usd": 0.002 if ok else 0.004})
        finally:
            self.running -= 1

    async def _trace(self, app, tenant_id, run_id, experiment_id, scenario_id, ok):
        """What an agent's traces look like once ingested: two tool calls per run."""
        store = app[STORE]
        for n, (tool, status, ms) in enumerate((("read_file", "ok", 10), ("write_file", "ok" if ok else "error", 30))):
            await store.execute(
                "INSERT INTO trace_events (tenant_id, trace_id, span_id, head, ts, event_type, phase, tool, status, duration_ms,"
                " run_id, experiment_id, scenario_id, source, received_at) VALUES (?, ?, ?, 1, ?, 'tool_call', 'end', ?, ?, ?, ?, ?, ?, 'test', ?)",
                (tenant_id, f"trace-{run_id}", f"span_{run_id}_{n}", now_iso(), tool, status, ms, run_id, experiment_id, scenario_id, now_iso()),
            )


async def start(aiohttp_client, home: Path, runner: FakeRunner) -> Api:
    """The daemon app with `runner` as its scenario runner."""
    app = create_app(make_settings(home))
    app[RUN_SCENARIO] = runner
    return await api_on(aiohttp_client, app)


async def upload(api: Api, yaml: str) -> dict:
    return await api.upload_yaml(yaml)


async def wait_done(api: Api, experiment_id: str, timeout: float = 10.0) -> dict:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        response, body = await api.get(f"/v1/experiments/{experiment_id}")
        assert response.status == 200, body
        if body["status"] in ("completed", "failed", "cancelled"):
            return body
        assert asyncio.get_running_loop().time() < deadline, f"experiment still {body['status']}: {body['completed_runs']} runs done"
        await asyncio.sleep(0.02)


async def run_experiment(api: Api, **body) -> dict:
    response, created = await api.post("/v1/experiments", json=body)
    assert response.status == 201, created
    response, started = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status == 202, started
    assert started == {"id": created["id"], "status": "running", "total_runs": created["total_runs"]}
    return await wait_done(api, created["id"])


def base_seed_for(pattern: list[bool], matrix_index: int = 0) -> str:
    """A base seed whose replica seeds are odd exactly where `pattern` says."""
    for n in range(10_000):
        base = f"base-{n}"
        if [odd(derive_seed(base, matrix_index, r)) for r in range(len(pattern))] == pattern:
            return base
    raise AssertionError("no base seed found")


