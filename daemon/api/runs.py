"""Runs: create (202, queued), read, list, replay, cancel, the SSE stream and the signed trajectory."""
from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from daemon.api.specs import owned_spec
from daemon.contract.common import Page
from daemon.contract.runs import InvariantResult, ReplayBody, Run, RunCreate, RunEvent, RunListQuery, TrajectoryQuery  # noqa: F401
from daemon.datasets import experiments as dataset_experiments
from daemon.errors import Conflict, Forbidden, InvalidRequest, NotFound
from daemon.contract import routes as R
from daemon.http import Reply, Routes, page_of, page_params
from daemon.store import runs as run_store
from daemon.store.runs import RunRow
from daemon.runner import records
from daemon.runner.engine import engine_of
from daemon.runner.runs import RunKind, RunService
from daemon.runner.scenario import CANCEL_KEY, base_url, topic
from daemon.sse import sse_response
from daemon.traces import gateway
from daemon.appkeys import EVENTS, SANDBOXES, SETTINGS, STORE, URL_SIGNING_KEY

routes = Routes("runs")
RUNS = web.AppKey("runs", RunService)
CANCEL_WAIT_S = 15.0


def service(app: web.Application) -> RunService:
    return app[RUNS]


async def describe(request: web.Request, run_id: str) -> dict[str, Any] | None:
    return await engine_of(request.app).describe(RunKind.name, run_id)


async def owned_run(request: web.Request) -> RunRow:
    run_id = request.match_info["run_id"]
    row = await records.get(request.app[STORE], run_id)
    if row is None:
        raise NotFound("run", run_id)
    if row.tenant_id != request["tenant_id"]:
        raise Forbidden(f"run '{run_id}' belongs to another tenant")
    return row


async def check_sandbox(request: web.Request, sandbox_id: str) -> None:
    from daemon.store import sandboxes as sandbox_store

    manager = request.app.get(SANDBOXES)
    row = await sandbox_store.get(request.app[STORE], sandbox_id)
    if row is None:
        raise NotFound("sandbox", sandbox_id)
    if row["tenant_id"] != request["tenant_id"]:
        raise Forbidden(f"sandbox '{sandbox_id}' belongs to another tenant")
    runtime = manager.runtime(sandbox_id) if manager is not None else None
    if runtime is None or runtime.state not in ("ready", "running", "creating"):
        raise Conflict(f"sandbox '{sandbox_id}' is {row['state']}; runs need a live sandbox", row["state"])


def default_seed(spec: Any) -> str:
    seed = spec.determinism.seed
    return str(seed) if seed not in (None, "") else records.new_seed()


async def queue_run(request: web.Request, *, record: dict, spec: Any, seed: str, inputs: dict | None, matrix_entry: dict | None,
                    secrets: dict | None, sandbox_id: str | None, replay_of: str | None = None,
                    pins: dict | None = None) -> Reply:
    """`pins`: the agent snapshot to run instead of the latest, and the model recording the gateway
    answers from instead of the providers (a reproducer's or a replay's)."""
    pins = {k: v for k, v in (pins or {}).items() if v}
    recording = pins.get("model_recording")
    if recording:
        recording = pins["model_recording"] = recording.split(":", 1)[-1]
        if spec.models is None:
            raise InvalidRequest("pins.model_recording: the spec has no models: block, so no model gateway to replay it",
                                 [{"loc": "pins.model_recording", "msg": "the spec declares no models"}])
        if gateway.recordings(request.app[SETTINGS], request["tenant_id"]).exists(recording) is False:
            raise NotFound("model recording", recording)
    run_id = records.new_run_id()
    await records.insert(
        request.app[STORE], run_id=run_id, tenant_id=request["tenant_id"], spec_id=record["id"],
        spec_version=record["version"], seed=seed, sandbox_id=sandbox_id, inputs=inputs, matrix_entry=matrix_entry,
        secret_names=list(secrets or {}), replay_of=replay_of,
    )
    if pins:
        await records.update(request.app[STORE], run_id, pins=pins,
                             **({"models": "replayed", "model_recording": recording} if recording else {}))
    await service(request.app).submit(run_id, secrets, request["tenant_id"], spec_id=record["id"],
                                concurrency_limit=spec.resources.fixed_concurrency)
    return Reply(await describe(request, run_id), status=202)


def load(record: dict, request: web.Request) -> Any:
    """The stored spec, within this daemon's caps (an operator may have lowered one since it was uploaded)."""
    from daemon.api.specs import validate_yaml
    from daemon.caps import check_caps

    spec = validate_yaml(record["yaml"], f"{record['id']}.yaml")
    check_caps(spec, request.app[SETTINGS], record["yaml"])
    return spec


@routes.post(R.CREATE_RUN, "Queue a run of a spec (fresh sandbox unless sandbox_id); 202 with the queued Run", errors=(404, 409, 503))
async def create_run(request: web.Request) -> Reply:
    body: RunCreate = request["body"]
    record = await owned_spec(request, body.spec_id, body.spec_version)
    spec = load(record, request)
    if body.sandbox_id:
        await check_sandbox(request, body.sandbox_id)
    try:  # a dataset scenario's reproducer: its record must still be there to replay
        await dataset_experiments.replay_record(request.app[STORE], request["tenant_id"], body.matrix_entry)
    except LookupError as exc:
        raise NotFound("dataset record", str((body.matrix_entry or {}).get("record_id")), str(exc)) from None
    return await queue_run(
        request, record=record, spec=spec, seed=body.seed or default_seed(spec), inputs=body.inputs,
        matrix_entry=body.matrix_entry, secrets=body.secrets, sandbox_id=body.sandbox_id,
        pins=body.pins.model_dump(exclude_none=True) if body.pins else None,
    )


RUN_FILTERS = {"status": "queued | running | passed | failed | errored", "spec_id": "exact", "experiment_id": "exact",
               "scenario_id": "exact", "sandbox_id": "exact", "replay_of": "exact"}


@routes.get(R.LIST_RUNS, "List runs, newest first")
async def list_runs(request: web.Request) -> Page[Run]:
    filters = {name: request.query.get(name) for name in RUN_FILTERS if request.query.get(name)}
    key, url = request.app[URL_SIGNING_KEY], base_url(request.app[SETTINGS])
    rows = await run_store.page(request.app[STORE], request["tenant_id"], *page_params(request), **filters)
    return page_of(rows, lambda r: records.body(RunRow.of(r), key=key, base_url=url))


@routes.get(R.GET_RUN, "A run with its scoring results")
async def get_run(request: web.Request) -> dict[str, Any]:
    return await describe(request, (await owned_run(request)).id)


@routes.post(R.REPLAY_RUN, "Replay a run: same spec version, seed, inputs and matrix entry; 202", errors=(503,))
async def replay_run(request: web.Request) -> Reply:
    row = await owned_run(request)
    body: ReplayBody = request["body"]
    record = await owned_spec(request, row.spec_id, row.spec_version)
    spec = load(record, request)
    pins = dict(row.pins or {})
    if spec.models is None or getattr(request.get("query"), "models", "recorded") == "live":
        pins.pop("model_recording", None)
    return await queue_run(
        request, record=record, spec=spec, seed=row.seed, inputs=row.inputs,
        matrix_entry=row.matrix_entry, secrets=body.secrets, sandbox_id=None, replay_of=row.id,
        pins=pins,
    )


@routes.post(R.CANCEL_RUN, "Cancel a queued or running run (-> errored, reason cancelled); 409 when finished", errors=(409,))
async def cancel_run(request: web.Request) -> dict[str, Any]:
    row = await owned_run(request)
    if row.status in records.TERMINAL:
        raise Conflict(f"run '{row.id}' already finished ({row.status})", row.status)
    delivered = await service(request.app).cancel(row.id)
    if delivered:
        deadline = asyncio.get_running_loop().time() + CANCEL_WAIT_S
        while asyncio.get_running_loop().time() < deadline:
            now = await records.get(request.app[STORE], row.id)
            if now is None or now.status in records.TERMINAL:
                break
            await asyncio.sleep(0.05)
    return await describe(request, row.id)


@routes.get(R.STREAM_RUN, "The run's events (SSE): step, tool_call, invariant_result, error, done; closes at the end "
            "or after SERVICE_STREAM_TIMEOUT seconds (default 1800), whichever comes first")
async def stream_run(request: web.Request) -> web.StreamResponse:
    row = await owned_run(request)
    bus = request.app[EVENTS]
    name = topic(row.id)
    if row.status in records.TERMINAL and name not in bus.history:
        return await sse_response(request, _replay_events(row))
    return await sse_response(request, bus.subscribe(name), timeout_s=request.app[SETTINGS].stream_timeout_s)


async def _replay_events(row: RunRow):
    """The stream of a run finished long ago (its live history is gone): results, then done."""
    result = row.result
    for item in result.get("invariant_results", []) + result.get("forbidden_results", []):
        yield {"type": "invariant_result", "invariant_id": item["invariant_id"], "status": item["status"]}
    if row.status == "errored":
        error = result.get("error") or {}
        yield {"type": "error", "error": row.reason or error.get("code") or "errored", "message": error.get("message", "")}
    yield {"type": "done", "run_id": row.id, "status": row.status, "score": row.score}


@routes.get(R.GET_RUN_TRAJECTORY, "The run's full trajectory JSON (signed URL: expires + sig; no API key needed)",
            auth=False, errors=(403,),
            responses={"200": {"description": "the trajectory JSON", "content": {"application/json": {"schema": {"type": "object"}}}}})
async def get_trajectory(request: web.Request) -> web.Response:
    run_id = request.match_info["run_id"]
    problem = records.check_trajectory_signature(
        request.app[URL_SIGNING_KEY], run_id, request.query.get("expires"), request.query.get("sig")
    )
    if problem:
        raise Forbidden(problem)
    row = await records.get(request.app[STORE], run_id)
    if row is None or not row.trajectory_digest:
        raise NotFound("trajectory", run_id, f"run '{run_id}' has no trajectory (yet)")
    from daemon.agents.blobs import Blobs

    path = Blobs(request.app[SETTINGS].blobs_dir).path(row.trajectory_digest)
    try:
        data = await asyncio.to_thread(path.read_bytes)
    except FileNotFoundError:
        raise NotFound("trajectory", run_id, f"the trajectory of run '{run_id}' is gone from the blob store")
    return web.Response(body=data, content_type="application/json", headers={"Cache-Control": "private, max-age=60"})


def setup(app: web.Application) -> None:
    async def ctx(app: web.Application):
        app[URL_SIGNING_KEY] = await asyncio.to_thread(records.signing_key, app[SETTINGS].home)
        runs = RunService(app)
        app[RUNS] = runs
        await runs.start()
        yield
        await runs.close()

    app[CANCEL_KEY] = {}
    app.cleanup_ctx.append(ctx)

