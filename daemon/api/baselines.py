"""Gating in CI: baseline bundles brought into this daemon (`POST /v1/experiments/import`, `svc eval import
FILE`) and more replicas where a verdict is undecided (`POST /v1/experiments/{id}/extend`, `--adaptive`)."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from daemon.appkeys import STORE
from daemon.contract import routes as R
from daemon.contract.experiments import BaselineBundle, ExperimentExtend
from daemon.errors import Conflict
from daemon.experiments.imports import import_bundle
from daemon.http import SETTINGS, Reply, Routes, parse_body
from daemon.store import experiments as experiment_store
from daemon.store import specs as spec_store

routes = Routes("baselines")


@routes.post(R.IMPORT_EXPERIMENT, "Import a baseline bundle (from `svc eval export --bundle`) as a finished experiment of this "
             "daemon: a new id, `imported` names where it came from; its spec is the version with the bundle's digest (created "
             "from the bundle's YAML when missing). 201 with its RunResults; 400 naming what is wrong with the bundle",
             errors=(409,))
async def import_experiment(request: web.Request) -> Reply:
    from daemon.experiments.service import get_service

    body = await parse_body(request, BaselineBundle)
    settings = request.app[SETTINGS]
    quotas = {"max_specs": settings.max_specs_per_tenant, "max_versions": settings.max_spec_versions}
    try:
        experiment_id = await import_bundle(request.app[STORE], request["tenant_id"], body.model_dump(), quotas)
    except spec_store.SpecQuotaExceeded as exc:
        raise Conflict(f"importing needs a new version of spec '{body.spec.id}' and the tenant is at its limit of {exc.limit} "
                       f"{'specs' if exc.what == 'specs' else 'versions'}", "limit_reached", limit=exc.limit)
    row = await experiment_store.get(request.app[STORE], experiment_id)
    results: dict[str, Any] = await get_service(request.app).run_results(row)
    return Reply(results, status=201)


@routes.post(R.EXTEND_EXPERIMENT, "Up to `runs` more replicas for the scenarios of a completed experiment whose verdict is still "
             "undecided (flaky), round-robin in matrix order (or over the `scenario_ids` named, in their order, whatever their "
             "verdict), each with the next replica index and its seed; the experiment "
             "runs again. 202 with what it spends (nothing, status completed, when no scenario is undecided); 400 naming a "
             "scenario not of this experiment; 409 unless completed", errors=(404, 409))
async def extend_experiment(request: web.Request) -> Reply:
    from daemon.app import owned
    from daemon.experiments.adaptive import extend
    from daemon.experiments.service import get_service

    body = await parse_body(request, ExperimentExtend)
    experiment_id = request.match_info["experiment_id"]
    row = owned(await experiment_store.get(request.app[STORE], experiment_id), request, "experiment", experiment_id)
    return Reply(await extend(get_service(request.app), row, body.runs, body.secrets, body.scenario_ids), status=202)
