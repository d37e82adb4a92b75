"""The run result is built once and owned by one place: from `POST /v1/experiments` to the stored
verdicts, the daemon never reads a run row back and writes each run's result once (the SQL the
real SQLite connection ran, traced, while an experiment of real sandboxes runs)."""
from __future__ import annotations

import re

import pytest

from daemon.appkeys import STORE
from daemon.store import jobs as job_store
from tests.support.api import Api
from tests.support.specs import tiny_spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

READ_RUN_ROW = re.compile(r"\bSELECT\b.*\bFROM\s+runs\s+WHERE\s+id\s*=", re.IGNORECASE | re.DOTALL)
WRITE_RESULT = re.compile(r"\bUPDATE\s+runs\s+SET\b.*\bresult\s*=", re.IGNORECASE | re.DOTALL)


async def test_an_experiment_reads_no_run_row_and_writes_each_result_once(api: Api):
    await api.upload_doc(tiny_spec("rowcount", replicas=2, matrix=[{"mode": "good"}, {"mode": "bad"}]))
    store = api.app[STORE]
    statements: list[str] = []
    await store.db.set_trace_callback(statements.append)
    try:
        response, created = await api.post("/v1/experiments", json={"spec_id": "rowcount"})
        assert response.status == 201, created
        response, started = await api.post(f"/v1/experiments/{created['id']}/run")
        assert response.status == 202, started

        async def settled():
            return await job_store.count(store, created["id"], ("pending", "queued", "running")) == 0
        await wait_for(settled, timeout=180, what="the experiment's replicas to finish", interval=0.2)
    finally:
        await store.db.set_trace_callback(None)

    async def finished():
        response, body = await api.get(f"/v1/experiments/{created['id']}")
        return body if body["status"] in ("completed", "failed", "cancelled") else None
    experiment = await wait_for(finished, timeout=60, what="the experiment to finish", interval=0.2)
    verdicts = sorted(run["status"] for scenario in experiment["scenarios"] for run in scenario["runs"])
    assert (verdicts, [s for s in statements if READ_RUN_ROW.search(s)],
            len([s for s in statements if WRITE_RESULT.search(s)])) == (["failed", "failed", "passed", "passed"], [], 4)
