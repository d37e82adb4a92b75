"""Experiments, scenarios, experiment metrics, comparison, eval history and export."""
from __future__ import annotations

import json
from typing import Any, AsyncIterator, Awaitable

from aiohttp import web

from daemon.app import owned
from daemon.errors import Conflict, InvalidRequest
from daemon.experiments import core
from daemon.effects.experiments import compare_effects
from daemon.experiments.compare import changed_scenarios, dataset_mismatch, gated_comparison, judge_warnings
from daemon.store import datasets as dataset_store
from daemon.store import experiments as experiment_store
from daemon.store import jobs as job_store
from daemon.store import runs as run_store
from daemon.store import traces as trace_store
from daemon.experiments.metrics import experiment_metrics, summary_for
from daemon.experiments.results import TERMINAL_EXPERIMENT
from daemon.experiments.experiment_kind import ExperimentKind
from daemon.experiments.service import COMPLETED_HOOKS_KEY, SERVICE_KEY, ExperimentService, get_service
from daemon.runner.engine import engine_of
from daemon.contract.common import Page
from daemon.contract.specs import SPEC_ID_SCHEMA
from daemon.contract.experiments import (
    CompareRequest,
    ExperimentCreate,
    ExperimentRecord,
    ExperimentRun,
    HistoryItem,
    ScenarioResult,
)
from daemon.contract import routes as R
from daemon.http import SETTINGS, Reply, Routes, page_of, page_params
from daemon.caps import check_caps
from daemon.spec import load_spec
from daemon.sse import batches, chunked_response, encode_rows, ndjson_response, sse_response
from daemon.store.db import loads
from daemon.appkeys import EVENTS, STORE

routes = Routes("experiments")

SCENARIO_STATUS_FILTER = {
    "passed": ("pass",), "pass": ("pass",),
    "failed": ("fail",), "fail": ("fail",),
    "error": ("error",), "errored": ("error",),
    "flaky": ("flaky",),
    "not_passed": ("fail", "flaky", "error"),
    "created": ("created",), "queued": ("queued",), "running": ("running",), "cancelled": ("cancelled",),
}


def setup(app: web.Application) -> None:
    app.setdefault(COMPLETED_HOOKS_KEY, [])
    app.cleanup_ctx.append(_service_ctx)


async def _service_ctx(app: web.Application):
    service = ExperimentService(app)
    app[SERVICE_KEY] = service
    await service.start()
    yield
    await service.stop()


async def owned_experiment(request: web.Request, experiment_id: str | None = None) -> Any:
    experiment_id = experiment_id or request.match_info["experiment_id"]
    row = await experiment_store.get(request.app[STORE], experiment_id)
    return owned(row, request, "experiment", experiment_id)


async def describe(request: web.Request, experiment_id: str) -> dict[str, Any] | None:
    return await engine_of(request.app).describe(ExperimentKind.name, experiment_id)


# --- experiments --------------------------------------------------------------------------------------


@routes.post(R.CREATE_EXPERIMENT, "Create an experiment (matrix entries x replicas of one spec version); status `created`", errors=(404,))
async def create_experiment(request: web.Request) -> dict[str, Any]:
    from daemon.api.specs import owned_spec

    body: ExperimentCreate = request["body"]
    record = await owned_spec(request, body.spec_id, body.spec_version)
    spec = load_spec(record["yaml"], f"{record['id']}.yaml")
    check_caps(spec, request.app[SETTINGS], record["yaml"])
    service = get_service(request.app)
    row = await service.create_experiment(
        tenant_id=request["tenant_id"], spec_record=record, spec=spec, name=body.name or record["id"],
        secrets=body.secrets, replicas=body.replicas, concurrency=body.concurrency, matrix=body.matrix,
        inputs=body.inputs, seed=body.seed, filter_failing_from=body.filter_failing_from,
        dataset_version=body.dataset_version, replay_models_from=body.replay_models_from,
        models_budget=body.models_budget.model_dump(exclude_none=True) if body.models_budget else None,
    )
    return await describe(request, row["id"])


@routes.get(R.LIST_EXPERIMENTS, "List experiments, newest first (filters: spec_id, status)")
async def list_experiments(request: web.Request) -> Page[ExperimentRecord]:
    status = request.query.get("status")
    if status and status not in core.EXPERIMENT_STATUSES:
        raise InvalidRequest(f"query.status: expected one of {', '.join(core.EXPERIMENT_STATUSES)}, got {status!r}",
                             [{"loc": "query.status", "msg": "unknown status"}])
    rows = await experiment_store.page_ids(request.app[STORE], request["tenant_id"], *page_params(request),
                                           spec_id=request.query.get("spec_id") or None, status=status or None)
    page = page_of(rows, lambda r: r["id"])
    page.items = await engine_of(request.app).describe_many(ExperimentKind.name, page.items)
    return page


@routes.get(R.GET_EXPERIMENT, "RunResults: the experiment, its scenarios (verdicts, scores, replicas, "
            "reproducers) and metrics")
async def get_experiment(request: web.Request) -> dict[str, Any]:
    row = await owned_experiment(request)
    return await get_service(request.app).run_results(row)


@routes.post(R.RUN_EXPERIMENT, "Start a created experiment: 202 {id, status: running, total_runs}; "
             "409 unless it is `created`. Optional body {secrets}",
             errors=(409, 503))
async def run_experiment(request: web.Request) -> Reply:
    row = await owned_experiment(request)
    body: ExperimentRun = request["body"]
    result = await get_service(request.app).run_experiment(row, body.secrets)
    return Reply(result, status=202)


@routes.post(R.CANCEL_EXPERIMENT, "Cancel a created or running experiment (queued runs are dropped, "
             "running ones stopped); 409 when already finished", errors=(409,))
async def cancel_experiment(request: web.Request) -> dict[str, Any]:
    row = await owned_experiment(request)
    await get_service(request.app).cancel_experiment(row)
    return await describe(request, row["id"])


@routes.get(R.STREAM_EXPERIMENT, "Server-Sent Events of an experiment: run, scenario and status events, "
            "then {type: done}; history replayed")
async def stream_experiment(request: web.Request) -> web.StreamResponse:
    row = await owned_experiment(request)
    topic = f"experiment:{row['id']}"
    events = request.app[EVENTS]
    if row["status"] in TERMINAL_EXPERIMENT and topic not in events.history:
        async def finished() -> AsyncIterator[Any]:
            yield {"type": "done", "experiment_id": row["id"], "status": row["status"], "finished_at": row["finished_at"],
                   "total_runs": row["total_runs"], "summary": loads(row["summary"], None)}
        return await sse_response(request, finished())
    return await sse_response(request, events.subscribe(topic))


# --- scenarios ----------------------------------------------------------------------------------------


@routes.get(R.LIST_SCENARIOS, "Scenarios of one experiment (experiment_id required; status passed|failed|flaky|error|...; "
            "scenario_id)", errors=(404,))
async def list_scenarios(request: web.Request) -> Page[ScenarioResult]:
    experiment_id = request.query.get("experiment_id")
    if not experiment_id:
        raise InvalidRequest("query.experiment_id is required", [{"loc": "query.experiment_id", "msg": "field required"}])
    row = await owned_experiment(request, experiment_id)
    status = request.query.get("status")
    wanted = None
    if status:
        wanted = SCENARIO_STATUS_FILTER.get(status)
        if wanted is None:
            raise InvalidRequest(f"query.status: expected one of {', '.join(SCENARIO_STATUS_FILTER)}, got {status!r}",
                                 [{"loc": "query.status", "msg": "unknown status"}])
    rows = await experiment_store.page_scenarios(request.app[STORE], experiment_id, *page_params(request),
                                                 statuses=wanted, scenario_id=request.query.get("scenario_id") or None)
    page = page_of(rows, lambda r: r)
    scenario_rows = page.items
    page.items = await get_service(request.app).scenario_views(row, scenario_rows)
    return page


# --- metrics, compare, history -------------------------------------------------------------------------


@routes.get(R.GET_EXPERIMENT_METRICS, "Aggregate metrics of an experiment: summary, tool_breakdown, "
            "cost_trend, pass_rate_trend (run-level; see the schema description)")
async def get_metrics(request: web.Request) -> dict[str, Any]:
    row = await owned_experiment(request)
    return await experiment_metrics(request.app[STORE], row["tenant_id"], row["id"])


async def _summary(request: web.Request, row: Any) -> dict[str, Any]:
    cached = loads(row["summary"], None) if row["status"] in TERMINAL_EXPERIMENT else None
    return cached or await summary_for(request.app[STORE], row["tenant_id"], row["id"])


@routes.post(R.COMPARE_EXPERIMENTS, "Compare a candidate with a baseline experiment (baseline_id) or an exported baseline "
             "bundle (baseline_bundle, not imported). Each metric gets the paired test's decision (regressed, improved, "
             "no_change, inconclusive) with its p-value and interval over the scenarios paired by matrix entry; `regressed` "
             "is a significant regression at `level` (default 0.05), or with gate_thresholds a crossed threshold: pass_rate "
             "-0.02 (absolute points), p95_wall_ms +20% (relative), mean_cost_per_run_usd +20% (relative), tool_success_rate "
             "-0.05 (absolute points). 409 while either experiment is created or running, when the datasets differ, or when "
             "a bundle's spec digest differs (unless allow_spec_change)", errors=(404, 409))
async def compare(request: web.Request) -> dict[str, Any]:
    body: CompareRequest = request["body"]
    store = request.app[STORE]
    service = get_service(request.app)
    candidate = await owned_experiment(request, body.candidate_id)
    _finished(candidate["id"], candidate["status"])
    if body.baseline_bundle is not None:
        bundle = body.baseline_bundle
        base_results = bundle.experiment.model_dump()
        for key in ("id", "status", "scenarios", "metrics"):
            if key not in base_results:
                raise InvalidRequest(f"body.baseline_bundle.experiment.{key} is missing: the bundle is not an exported RunResults",
                                     [{"loc": f"body.baseline_bundle.experiment.{key}", "msg": "field required"}])
        _finished(f"{base_results['id']} (bundle)", base_results["status"])
        await _same_spec_or_allowed(store, candidate, bundle.spec.digest, bundle.spec.id, bundle.spec.version, body.allow_spec_change)
        base_dataset, base_summary = base_results.get("dataset"), base_results["metrics"]
        base_scenarios = base_results["scenarios"]
        base_brief = {k: base_results.get(k) for k in ("id", "name", "spec_id", "spec_version", "status", "created_at")}
    else:
        baseline = await owned_experiment(request, body.baseline_id)
        _finished(baseline["id"], baseline["status"])
        base_dataset = await dataset_store.experiment_dataset(store, baseline["id"])
        base_summary = await summary_for(store, baseline["tenant_id"], baseline["id"])
        base_scenarios = await _scenarios(service, baseline)
        base_brief = _brief(baseline)
    mismatch = dataset_mismatch(base_dataset, await dataset_store.experiment_dataset(store, candidate["id"]))
    if mismatch:
        raise Conflict(mismatch, "dataset_version_mismatch")
    overrides = body.thresholds.model_dump(exclude_none=True) if body.thresholds else None
    cand_scenarios = await _scenarios(service, candidate)
    result = gated_comparison(base_summary, await summary_for(store, candidate["tenant_id"], candidate["id"]), base_scenarios,
                              cand_scenarios, thresholds=overrides, level=body.level, gate_thresholds=body.gate_thresholds,
                              quarantine=await _quarantine(store, candidate))
    scenarios = changed_scenarios(base_scenarios, cand_scenarios)
    warnings = await judge_warnings(store, body.baseline_id, candidate["id"]) if body.baseline_id else []
    return {
        "baseline_id": base_brief["id"],
        "candidate_id": candidate["id"],
        **result,
        **scenarios,
        "same_spec": base_brief["spec_id"] == candidate["spec_id"],
        "baseline": base_brief,
        "candidate": _brief(candidate),
        "judge_warnings": warnings,
        "baseline_source": "bundle" if body.baseline_bundle is not None else "experiment",
        "effects": [] if body.baseline_bundle is not None else [
            item.model_dump() for item in await compare_effects(store, request.app[SETTINGS].blobs_dir, candidate["tenant_id"],
                                                                base_scenarios, cand_scenarios)],
    }


async def _quarantine(store: Any, candidate: Any) -> list[str]:
    """The candidate's spec's `quarantine:` list (empty when the spec no longer loads)."""
    from daemon.spec import load_spec
    from daemon.store import specs as spec_store

    record = await spec_store.get(store, candidate["tenant_id"], candidate["spec_id"], candidate["spec_version"])
    if record is None:
        return []
    try:
        return list(load_spec(record["yaml"], f"{record['id']}.yaml").quarantine)
    except Exception:
        return []


def _finished(experiment_id: str, status: str) -> None:
    if status in ("created", "running"):
        raise Conflict(f"experiment '{experiment_id}' is {status}; compare finished experiments", status)


async def _same_spec_or_allowed(store: Any, candidate: Any, digest: str, spec_id: str, version: int, allowed: bool) -> None:
    from daemon.store import specs as spec_store

    record = await spec_store.get(store, candidate["tenant_id"], candidate["spec_id"], candidate["spec_version"])
    theirs = record["sha256"] if record else None
    if theirs != digest and not allowed:
        raise Conflict(f"the baseline ran spec '{spec_id}' version {version} (digest {digest}) and the candidate spec "
                       f"'{candidate['spec_id']}' version {candidate['spec_version']} (digest {theirs}): the specs differ, so the "
                       "comparison is refused; pass allow_spec_change (--allow-spec-change) to compare anyway", "spec_changed",
                       baseline_digest=digest, candidate_digest=theirs)


async def _scenarios(service: ExperimentService, row: Any) -> list[dict[str, Any]]:
    rows = await experiment_store.scenarios(service.store, row["id"])
    return await service.scenario_views(row, rows)


def _brief(row: Any) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "spec_id": row["spec_id"], "spec_version": row["spec_version"],
            "status": row["status"], "created_at": row["created_at"]}


@routes.get(R.EVAL_HISTORY, "Experiments of one spec, newest first, with pass_rate, total_cost_usd and "
            "p95_wall_ms",
            path_params={"spec_id": SPEC_ID_SCHEMA})
async def eval_history(request: web.Request) -> Page[HistoryItem]:
    from daemon.api.specs import owned_spec

    record = await owned_spec(request, request.match_info["spec_id"])
    rows = await experiment_store.page_of_spec(request.app[STORE], request["tenant_id"], record["id"], *page_params(request),
                                               status=request.query.get("status") or None)
    page = page_of(rows, lambda r: r)
    items = []
    for row in page.items:
        summary = await _summary(request, row)
        items.append({
            "experiment_id": row["id"], "name": row["name"], "status": row["status"], "created_at": row["created_at"],
            "finished_at": row["finished_at"], "spec_version": row["spec_version"], "total_runs": summary.get("total_runs"),
            "pass_rate": summary.get("pass_rate"), "total_cost_usd": summary.get("total_cost_usd"),
            "p95_wall_ms": summary.get("p95_wall_ms"),
            "dataset": await dataset_store.experiment_dataset(request.app[STORE], row["id"]),
        })
    page.items = items
    return page


# --- export -------------------------------------------------------------------------------------------


@routes.get(R.EXPORT_EXPERIMENT, "Full bundle: experiment (RunResults), spec YAML, runs, trace events, "
            "scores and their summary (scored, unscored, judge_error_rate, per rule). format=json (one object) or ndjson "
            "(one {type, ...} record per line)",
            responses={"200": {"description": "the bundle (format=json) or one {type, ...} record per line (format=ndjson)",
                               "content": {"application/json": {"schema": {"type": "object"}},
                                           "application/x-ndjson": {"schema": {}}}}})
async def export_experiment(request: web.Request) -> web.StreamResponse:
    row = await owned_experiment(request)
    fmt = request.query.get("format", "json")
    if fmt not in ("json", "ndjson"):
        raise InvalidRequest(f"query.format: expected json or ndjson, got {fmt!r}", [{"loc": "query.format", "msg": "json or ndjson"}])
    service = get_service(request.app)
    results = await service.run_results(row)
    from daemon.store import specs as spec_store

    spec = await spec_store.get(request.app[STORE], row["tenant_id"], row["spec_id"], row["spec_version"])
    spec_body = {"id": row["spec_id"], "version": row["spec_version"], "name": spec["name"] if spec else None,
                 "yaml": spec["yaml"] if spec else None}
    if fmt == "ndjson":
        async def lines() -> AsyncIterator[Any]:
            yield {"type": "experiment", **{k: v for k, v in results.items() if k != "scenarios"}}
            yield {"type": "spec", **spec_body}
            for scenario in results["scenarios"]:
                yield {"type": "scenario", **scenario}
            async for run in _export_runs(request, row):
                yield {"type": "run", **run}
            async for event in _export_traces(request, row):
                yield {"type": "trace_event", **event}
            async for score in _export_scores(request, row):
                yield {"type": "score", **score}
            yield {"type": "score_summary", **await _score_summary(request, row)}

        response = await ndjson_response(request, lines())
        return response
    # One JSON object, written in chunks: runs, trace events and scores are never all in memory,
    # and they are encoded a batch at a time off the event loop (daemon.sse.encode_rows).
    async def chunks() -> AsyncIterator[bytes]:
        head = {"format": "svc-experiment-export/1", "experiment": results, "spec": spec_body}
        yield (await encode_rows([head], lines=False))[:-1]  # the object without its closing brace
        for name, source in (("runs", _export_runs), ("trace_events", _export_traces), ("scores", _export_scores)):
            yield f',"{name}":['.encode()
            first = True
            async for batch in batches(source(request, row)):
                yield (b"" if first else b",") + await encode_rows(batch, lines=False)
                first = False
            yield b"]"
        yield b',"score_summary":' + (await encode_rows([await _score_summary(request, row)], lines=False))
        yield b"}"

    return await chunked_response(request, chunks(), "application/json",
                                  {"Content-Disposition": f'attachment; filename="{row["id"]}.json"'})


async def _rows_if_table(rows: Awaitable[list[Any]]) -> list[Any]:
    try:
        return await rows
    except Exception as exc:
        if "no such table" in str(exc) or "no such column" in str(exc):
            return []
        raise


async def _export_runs(request: web.Request, row: Any) -> AsyncIterator[dict[str, Any]]:
    store = request.app[STORE]
    runs = await _rows_if_table(run_store.of_group(store, row["tenant_id"], row["id"]))
    seen = set()
    for run in runs:
        item = dict(run)
        item.pop("tenant_id", None)
        for key in ("result", "inputs", "matrix_entry", "secret_names"):
            if isinstance(item.get(key), str):
                try:
                    item[key] = json.loads(item[key])
                except ValueError:
                    pass
        seen.add(item["id"])
        yield item
    # Runs the runner never stored (errored before it started): the scheduler's own record.
    jobs = await job_store.finished_of_group_by_seq(store, row["id"])
    for job in jobs:
        if job["run_id"] in seen:
            continue
        yield {"id": job["run_id"], "experiment_id": row["id"], "scenario_id": job["scenario_id"], "status": job["status"],
               "seed": job["seed"], "score": job["score"], "reason": job["error"], "result": loads(job["result"], None),
               "created_at": job["queued_at"], "finished_at": job["finished_at"]}


async def _export_traces(request: web.Request, row: Any) -> AsyncIterator[dict[str, Any]]:
    store = request.app[STORE]
    last = 0
    while True:
        rows = await _rows_if_table(trace_store.experiment_rows_after(store, row["tenant_id"], row["id"], row["id"], last))
        if not rows:
            return
        for event in rows:
            item = dict(event)
            item.pop("tenant_id", None)
            for key in ("cost", "metadata"):
                if isinstance(item.get(key), str):
                    try:
                        item[key] = json.loads(item[key])
                    except ValueError:
                        pass
            yield item
        last = rows[-1]["seq"]


async def _export_scores(request: web.Request, row: Any) -> AsyncIterator[dict[str, Any]]:
    from daemon.store import scores as score_store

    # every row (a re-score appends), in the shape GET /v1/scores answers
    for score in await score_store.experiment_scores(request.app[STORE], row["tenant_id"], row["id"], every=True):
        yield score_store.score_body(score)


async def _score_summary(request: web.Request, row: Any) -> dict[str, Any]:
    """scored, unscored, judge_error_rate and per-rule aggregates, as GET /v1/experiments/{id}/scores reports them."""
    from daemon.scores.aggregate import summarize
    from daemon.store import scores as score_store

    return summarize(await score_store.aggregates(request.app[STORE], row["tenant_id"], row["id"]))
