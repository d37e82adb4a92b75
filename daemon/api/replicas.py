"""Replica suites: create (202 with one seed per replica), read, stream completions."""
from __future__ import annotations

from typing import Any, AsyncIterator

from aiohttp import web

from daemon.app import owned
from daemon.contract.replicas import ReplicaSuiteCreate
from daemon.experiments.service import get_service, replica_event
from daemon.experiments.suites import SuiteKind
from daemon.contract import routes as R
from daemon.http import SETTINGS, Reply, Routes
from daemon.caps import check_caps
from daemon.spec import load_spec
from daemon.sse import sse_response
from daemon.store import experiments as experiment_store
from daemon.store import jobs as job_store
from daemon.runner.engine import engine_of
from daemon.appkeys import EVENTS, STORE

routes = Routes("replicas")


async def describe(request: web.Request, suite_id: str) -> dict[str, Any] | None:
    return await engine_of(request.app).describe(SuiteKind.name, suite_id)


async def owned_suite(request: web.Request) -> Any:
    suite_id = request.match_info["suite_id"]
    row = await experiment_store.get_suite(request.app[STORE], suite_id)
    return owned(row, request, "replica suite", suite_id)


@routes.post(R.CREATE_REPLICAS, "Run a spec n_replicas times (2..1000), one seed per replica; 202 with the seeds. Any seed "
             "passed to run creation reproduces its replica",
             errors=(404, 503))
async def create_replicas(request: web.Request) -> Reply:
    from daemon.api.specs import owned_spec

    body: ReplicaSuiteCreate = request["body"]
    record = await owned_spec(request, body.spec_id, body.spec_version)
    spec = load_spec(record["yaml"], f"{record['id']}.yaml")
    check_caps(spec, request.app[SETTINGS], record["yaml"])
    suite_id = await get_service(request.app).create_suite(tenant_id=request["tenant_id"], spec_record=record, spec=spec,
                                                           n_replicas=body.n_replicas, inputs=body.inputs, secrets=body.secrets)
    return Reply(await describe(request, suite_id), status=202)


@routes.get(R.GET_REPLICAS, "A replica suite: status, passed, failed, failure_rate, verdict, seeds, replicas")
async def get_replicas(request: web.Request) -> dict[str, Any] | None:
    row = await owned_suite(request)
    return await describe(request, row["id"])


@routes.get(R.STREAM_REPLICAS, "Server-Sent Events: {type: replica, index, seed, run_id, status, score, "
            "duration_ms} per finished replica, then {type: done, suite}; history replayed to late subscribers")
async def stream_replicas(request: web.Request) -> web.StreamResponse:
    row = await owned_suite(request)
    service = get_service(request.app)
    topic = f"replicas:{row['id']}"
    events = request.app[EVENTS]
    if row["status"] != "running" and topic not in events.history:
        # Finished before this daemon started: rebuild the stream from the store.
        async def stored() -> AsyncIterator[Any]:
            for job in await job_store.finished_of_group(service.store, row["id"]):
                yield replica_event(job)
            yield {"type": "done", "suite": await describe(request, row["id"])}

        return await sse_response(request, stored())
    return await sse_response(request, events.subscribe(topic))
