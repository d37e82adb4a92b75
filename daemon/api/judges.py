"""LLM judges: create, list, get, delete, evaluate one output, calibrate against labelled examples."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from aiohttp import web

from daemon.app import owned_by_path
from daemon.contract.common import Page
from daemon.contract.judges import (
    MAX_JUDGES_PER_TENANT,
    MAX_VALUE_CHARS,
    CalibrateRequest,
    Calibration,
    Judge,
    JudgeCreate,
    JudgeEvalRequest,
    JudgeVerdict,
)
from daemon.errors import Conflict, InvalidRequest
from daemon.contract import routes as R
from daemon.http import STORE, Routes, page_body, page_params
from daemon.judges import JudgeDefinition, evaluate
from daemon.judges.calibration import calibrate
from daemon.judges.client import close_session
from daemon.store import judges as repo
from daemon.util import new_id

routes = Routes("judges")
log = logging.getLogger("svcd.judges")

JUDGE_ERROR_NOTE = (
    "A failed judge call (rate limited, timeout, network, server error, unparsable reply, refusal, not configured, "
    "rejected) is still 200: `score` and `passed` are null and `judge_error {code, message}` says why; the request "
    "did not fail, the judge did. It is never a score of 0. Identical calls (model, rubric, kind, choices, input, "
    "output, expected) are answered from the tenant's cache without calling the judge unless `cache=false`.")


async def _owned(request: web.Request) -> dict[str, Any]:
    return await owned_by_path(request, "judge_id", repo.get, "judge")


def _body(row: dict[str, Any]) -> Judge:
    return Judge.model_validate({k: v for k, v in row.items() if k not in ("seq", "tenant_id")})


def _definition(row: dict[str, Any]) -> JudgeDefinition:
    return JudgeDefinition(rubric=row["rubric"], model=row["model"], threshold=row["threshold"], kind=row["kind"],
                           choices=row["choices"])


def _bounded(value: Any, loc: str) -> Any:
    size = len(json.dumps(value, ensure_ascii=False))
    if size > MAX_VALUE_CHARS:
        raise InvalidRequest(f"{loc}: {size} characters as JSON; at most {MAX_VALUE_CHARS} are judged",
                             [{"loc": loc, "msg": f"longer than {MAX_VALUE_CHARS} characters as JSON"}])
    return value


@routes.post(R.CREATE_JUDGE, "Create a judge", errors=(409,), typed=True,
             description=f"A tenant has at most {MAX_JUDGES_PER_TENANT} judges: one more is 409 `conflict` with "
                         f"`details: {{state: \"limit\", limit: {MAX_JUDGES_PER_TENANT}}}`.")
async def create_judge(request: web.Request) -> Judge:
    body: JudgeCreate = request["body"]
    store, tenant = request.app[STORE], request["tenant_id"]
    if await repo.count(store, tenant) >= MAX_JUDGES_PER_TENANT:
        raise Conflict(f"a tenant has at most {MAX_JUDGES_PER_TENANT} judges; delete one first", state="limit",
                       limit=MAX_JUDGES_PER_TENANT)
    row = await repo.create(store, tenant, new_id("judge_"), name=body.name, rubric=body.rubric, model=body.model,
                            threshold=body.threshold, kind=body.kind, choices=body.choices)
    return _body(row)


@routes.get(R.LIST_JUDGES, "List judges, newest first")
async def list_judges(request: web.Request) -> Page[Judge]:
    limit, before = page_params(request)
    rows = await repo.page(request.app[STORE], request["tenant_id"], limit + 1, before)
    kept = rows[:limit]
    return page_body([_body(r) for r in kept], kept[-1]["seq"] if kept else None, limit, len(rows))


@routes.get(R.GET_JUDGE, "One judge with its last calibration", typed=True)
async def get_judge(request: web.Request) -> Judge:
    return _body(await _owned(request))


@routes.delete(R.DELETE_JUDGE, "Delete a judge")
async def delete_judge(request: web.Request) -> web.Response:
    row = await _owned(request)
    await repo.delete(request.app[STORE], row["id"])
    return web.Response(status=204)


@routes.post(R.EVAL_JUDGE, "Judge one output", typed=True, description=JUDGE_ERROR_NOTE)
async def eval_judge(request: web.Request) -> JudgeVerdict:
    row = await _owned(request)
    body: JudgeEvalRequest = request["body"]
    for loc in ("input", "output", "expected"):
        _bounded(getattr(body, loc), loc)
    verdict = await evaluate(request.app[STORE], _definition(row), input=body.input, output=body.output,
                             expected=body.expected, use_cache=request["query"].cache, tenant_id=request["tenant_id"])
    return JudgeVerdict(score=verdict.score, passed=verdict.passed, reason=verdict.reason, label=verdict.label,
                        judge_error=verdict.judge_error)


@routes.post(R.CALIBRATE_JUDGE, "Calibrate a judge against labelled examples", typed=True, description=(
                 "Each example is judged (8 at a time, through the cache unless `cache=false`); `label: true` means "
                 "the output should pass. Examples whose judge call failed are left out of the metrics and counted "
                 "in `unscored` and `judge_errors`. Warnings when fewer than 50 examples were scored or "
                 "cohen_kappa is below 0.6. The result is stored on the judge and returned by GET."))
async def calibrate_judge(request: web.Request) -> Calibration:
    row = await _owned(request)
    body: CalibrateRequest = request["body"]
    examples = []
    for index, example in enumerate(body.examples):
        for field in ("input", "output", "expected"):
            _bounded(getattr(example, field), f"examples.{index}.{field}")
        examples.append(example.model_dump())
    result = await calibrate(request.app[STORE], _definition(row), examples, use_cache=request["query"].cache,
                             tenant_id=request["tenant_id"])
    calibration = Calibration.model_validate(result)
    await repo.set_calibration(request.app[STORE], row["id"], calibration.model_dump(mode="json"))
    return calibration


CACHE_KEEP_PER_TENANT = 100_000  # cached verdicts kept per tenant (the newest)
CACHE_PRUNE_EVERY_S = 3600.0


def setup(app: web.Application) -> None:
    async def judge_housekeeping(app: web.Application):
        async def prune_forever() -> None:
            while True:
                try:
                    await repo.prune_cache(app[STORE], CACHE_KEEP_PER_TENANT)
                except Exception as exc:  # noqa: BLE001 - housekeeping never stops the daemon
                    log.warning("cannot prune the judge cache: %s", exc)
                await asyncio.sleep(CACHE_PRUNE_EVERY_S)

        task = asyncio.create_task(prune_forever())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await close_session()

    app.cleanup_ctx.append(judge_housekeeping)
