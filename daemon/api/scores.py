"""Score rules (CRUD), offline scoring jobs and score reads (SPEC "Scoring", G5)."""
from __future__ import annotations

from typing import Any, AsyncIterator

from aiohttp import web

from daemon.app import owned, owned_by_path
from daemon.contract.common import Page
from daemon.contract.scores import (
    MAX_SCORES_IN_SUMMARY,
    ExperimentScores,
    Score,
    ScoreJob,
    ScoreJobAccepted,
    ScoreRequest,
    ScoreRule,
    ScoreRuleCreate,
)
from daemon.errors import Conflict, InvalidRequest
from daemon.experiments.groups import COMPLETED_HOOKS_KEY
from daemon.contract import routes as R
from daemon.http import EVENTS, SETTINGS, SPEC_CHECK_HOOKS, SPEC_SAVED_HOOKS, STORE, Reply, Routes, paginate
from daemon.scores import jobs as score_jobs
from daemon.scores.aggregate import summarize
from daemon.scores.rules import check_spec_rules, save_spec_rules, validate
from daemon.sse import sse_response
from daemon.store import scores as score_store
from daemon.util import new_id, now_iso

routes = Routes("scores")
MAX_RULES_PER_TENANT = 1_000
MAX_UNFINISHED_JOBS_PER_TENANT = 10


async def _rule(request: web.Request) -> Any:
    return await owned_by_path(request, "rule_id", score_store.get_rule, "score rule")


async def _experiment(request: web.Request, experiment_id: str) -> Any:
    return owned(await score_store.experiment(request.app[STORE], experiment_id), request, "experiment", experiment_id)


@routes.post(R.CREATE_SCORE_RULE, "Create a score rule", typed=True, description=(
    "400 names the field: a missing `rubric` (or `judge_id`) / `pattern` / `command` for the rule's type, a field another type "
    "takes, a pattern that does not compile, an unknown `judge_id`. 409 when the tenant already has "
    f"{MAX_RULES_PER_TENANT} rules."), errors=(409,))
async def create_rule(request: web.Request) -> ScoreRule:
    body: ScoreRuleCreate = request["body"]
    if await score_store.rule_count(request.app[STORE], request["tenant_id"]) >= MAX_RULES_PER_TENANT:
        raise Conflict(f"a tenant has at most {MAX_RULES_PER_TENANT} score rules; delete one first", "limit_reached",
                       limit=MAX_RULES_PER_TENANT)
    fields = await validate(request.app[STORE], request["tenant_id"], body.model_dump(mode="json", exclude_none=True))
    rule_id = new_id("sr_")
    await score_store.insert_rule(request.app[STORE], rule_id, request["tenant_id"], fields, "api", now_iso())
    return ScoreRule.model_validate(score_store.rule_body(await score_store.get_rule(request.app[STORE], rule_id)))


@routes.get(R.LIST_SCORE_RULES, "List score rules, newest first (filter: eval_id)")
async def list_rules(request: web.Request) -> Page[ScoreRule]:
    sql, params = score_store.rule_list_sql(request["tenant_id"], request["query"].eval_id)
    return await paginate(request.app[STORE], sql, params, request, score_store.rule_body)


@routes.get(R.GET_SCORE_RULE, "One score rule", typed=True)
async def get_rule(request: web.Request) -> ScoreRule:
    return ScoreRule.model_validate(score_store.rule_body(await _rule(request)))


@routes.delete(R.DELETE_SCORE_RULE, "Delete a score rule (its score rows stay)")
async def delete_rule(request: web.Request) -> web.Response:
    row = await _rule(request)
    await score_store.delete_rule(request.app[STORE], row["id"])
    return web.Response(status=204)


@routes.post(R.SCORE_EXPERIMENT, "Score an experiment's spans offline: 202 {job_id, status}", typed=True, description=(
                 "Without `rule_ids`: every rule of the tenant scoped to the experiment's spec or to no spec. Each run appends "
                 "rows; reads show the latest per span and rule. 400 naming `rule_ids` for an unknown rule or when there is no "
                 f"rule to apply. 409 while the tenant has {MAX_UNFINISHED_JOBS_PER_TENANT} scoring jobs queued or running."),
             errors=(409,))
async def score_experiment(request: web.Request) -> Reply:
    experiment = await _experiment(request, request.match_info["experiment_id"])
    body: ScoreRequest = request["body"]
    store = request.app[STORE]
    if await score_store.unfinished_job_count(store, request["tenant_id"]) >= MAX_UNFINISHED_JOBS_PER_TENANT:
        raise Conflict(f"at most {MAX_UNFINISHED_JOBS_PER_TENANT} scoring jobs per tenant may be queued or running; wait for one "
                       "to finish", "limit_reached", limit=MAX_UNFINISHED_JOBS_PER_TENANT)
    if body.rule_ids is not None:
        wanted = list(dict.fromkeys(body.rule_ids))
        found = {r["id"] for r in await score_store.rules_by_id(store, wanted) if r["tenant_id"] == request["tenant_id"]}
        for index, rule_id in enumerate(wanted):
            if rule_id not in found:
                raise InvalidRequest(f"rule_ids[{index}]: no score rule '{rule_id}'",
                                     [{"loc": f"rule_ids.{index}", "msg": f"no score rule '{rule_id}'"}])
        rule_ids = wanted
    else:
        rule_ids = [r["id"] for r in await score_store.rules_for_experiment(store, request["tenant_id"], experiment["spec_id"])]
        if not rule_ids:
            raise InvalidRequest(f"rule_ids: no score rule applies to experiment '{experiment['id']}' (create one, or name rule_ids)",
                                 [{"loc": "rule_ids", "msg": "no score rule to apply"}])
    job_id = await score_jobs.submit(request.app, request["tenant_id"], experiment["id"], rule_ids, "api")
    row = await score_store.get_job(store, job_id)
    return Reply(ScoreJobAccepted(job_id=job_id, status=row["status"]), status=202)


async def _job(request: web.Request) -> Any:
    return await owned_by_path(request, "job_id", score_store.get_job, "score job")


@routes.get(R.GET_SCORE_JOB, "A scoring job: status and progress (done of total)", typed=True)
async def get_job(request: web.Request) -> ScoreJob:
    return ScoreJob.model_validate(score_store.job_body(await _job(request)))


@routes.get(R.STREAM_SCORE_JOB, "Server-Sent Events of a scoring job: progress events, then {type: done}")
async def stream_job(request: web.Request) -> web.StreamResponse:
    row = await _job(request)
    events = request.app[EVENTS]
    topic = score_jobs.topic(row["id"])
    if row["status"] in ("completed", "failed") and topic not in events.history:
        async def finished() -> AsyncIterator[Any]:
            yield {"type": "done", "job": score_store.job_body(row)}
        return await sse_response(request, finished())
    return await sse_response(request, events.subscribe(topic), timeout_s=request.app[SETTINGS].stream_timeout_s)


@routes.get(R.EXPERIMENT_SCORES, "An experiment's scores: per-rule aggregates (n, passed, pass_rate, "
            "mean_score, scored, unscored, judge_error_rate) and the rows (latest per span and rule unless all=true)", typed=True)
async def experiment_scores(request: web.Request) -> ExperimentScores:
    experiment = await _experiment(request, request.match_info["experiment_id"])
    every = request["query"].all
    store = request.app[STORE]
    rows = await score_store.experiment_scores(store, experiment["tenant_id"], experiment["id"], every, MAX_SCORES_IN_SUMMARY + 1)
    aggregates = await score_store.aggregates(store, experiment["tenant_id"], experiment["id"], every)
    return ExperimentScores.model_validate({
        "experiment_id": experiment["id"], **summarize(aggregates),
        "items": [score_store.score_body(r) for r in rows[:MAX_SCORES_IN_SUMMARY]],
        "truncated": len(rows) > MAX_SCORES_IN_SUMMARY,
    })


@routes.get(R.LIST_SCORES, "Score rows of one experiment, newest first (experiment_id required; rule_id; all=true for every "
            "row, default the latest per span and rule)", errors=(404,))
async def list_scores(request: web.Request) -> Page[Score]:
    query = request["query"]
    experiment = await _experiment(request, query.experiment_id)
    sql, params = score_store.score_list_sql(experiment["tenant_id"], experiment["id"], query.rule_id, query.all)
    return await paginate(request.app[STORE], sql, params, request, score_store.score_body)


def setup(app: web.Application) -> None:
    app[SPEC_CHECK_HOOKS].append(check_spec_rules)
    app[SPEC_SAVED_HOOKS].append(save_spec_rules)
    app.setdefault(COMPLETED_HOOKS_KEY, []).append(score_jobs.score_on_completion)

    async def ctx(app: web.Application):
        await score_jobs.start(app)
        yield
        await score_jobs.stop(app)

    app.cleanup_ctx.append(ctx)
