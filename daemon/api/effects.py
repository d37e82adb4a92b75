"""A run's effect ledger and the differences between two runs' ledgers (daemon/effects/)."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from daemon.api.runs import owned_run
from daemon.appkeys import SETTINGS, STORE
from daemon.contract import routes as R
from daemon.contract.effects import EffectsDiff, EffectsDiffQuery, RunEffects
from daemon.effects.diff import diff_runs
from daemon.effects.load import NoTrajectory, run_effects
from daemon.errors import Conflict, Forbidden, NotFound
from daemon.http import Routes
from daemon.runner import records
from daemon.store.runs import RunRow

routes = Routes("effects")


async def ledger(request: web.Request, row: RunRow) -> RunEffects:
    try:
        return await run_effects(request.app[STORE], request.app[SETTINGS].blobs_dir, row)
    except NoTrajectory as exc:
        raise Conflict(f"run '{row.id}' has no effects to show: {exc}", row.status) from None


@routes.get(R.GET_RUN_EFFECTS, "The run's effect ledger: db writes per table and operation, HTTP calls per host, method and "
            "path, model calls per model, files changed inside and outside /workspace, processes; 409 until the run has "
            "finished", errors=(409,))
async def get_effects(request: web.Request) -> dict[str, Any]:
    return (await ledger(request, await owned_run(request))).model_dump()


@routes.get(R.DIFF_RUN_EFFECTS, "What differs between this run's (A) effects and run `other`'s (B), one line each; kinds one "
            "of them did not record are listed in `unknown`", errors=(409,))
async def diff_effects(request: web.Request) -> dict[str, Any]:
    a = await owned_run(request)
    query: EffectsDiffQuery = request["query"]
    b = await records.get(request.app[STORE], query.other)
    if b is None:
        raise NotFound("run", query.other)
    if b.tenant_id != request["tenant_id"]:
        raise Forbidden(f"run '{query.other}' belongs to another tenant")
    result: EffectsDiff = diff_runs(await ledger(request, a), await ledger(request, b))
    return result.model_dump()
