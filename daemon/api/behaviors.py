"""Behaviors: create, list, get, delete, verdicts (which move the breach latch), stats and the
notifications the latch sent."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from daemon.alerts import latch
from daemon.alerts.conditions import bad, check_destination
from daemon.alerts.rules import check_url, new_secret
from daemon.api.alerts import WORKER, deliveries_page
from daemon.app import owned_by_path
from daemon.contract.alerts import AlertDelivery
from daemon.contract.behaviors import WINDOW, Behavior, BehaviorCreate, VerdictsPost
from daemon.contract.common import Page
from daemon.errors import NotFound
from daemon.contract import routes as R
from daemon.http import STORE, Reply, Routes, paginate
from daemon.store import behaviors as behavior_store
from daemon.store.db import loads
from daemon.util import new_id, now_iso

routes = Routes("behaviors")
FIELDS = tuple(name for name in Behavior.model_fields if name not in ("secret", "breached", "labels"))


def behavior_body(row: Any, secret: bool = False) -> dict[str, Any]:
    data = {name: row[name] for name in FIELDS}
    data["labels"] = loads(row["labels"], None)
    data["breached"] = bool(row["latch_breached"])
    if secret:
        data["secret"] = row["secret"]
    return data


async def _owned(request: web.Request) -> Any:
    return await owned_by_path(request, "behavior_id", behavior_store.get, "behavior")


async def _check_source(store: Any, tenant_id: str, table: str, value: str | None, resource: str) -> None:
    """A named judge or score rule must be the tenant's (checked once that table exists)."""
    if value is not None and await behavior_store.table_exists(store, table):
        if not await behavior_store.owned_row(store, table, value, tenant_id):
            raise NotFound(resource, value)


@routes.post(R.CREATE_BEHAVIOR, "Create a behavior (binary or classifier) with its baseline and routing", secret_once="behavior", typed=True, errors=(404,), description=(
                 "A classifier names what produces its verdicts (`judge_id` or `rule_id`); an unknown judge or score rule is "
                 "404. With `rule_id` every span that score rule scores (offline jobs, scoring on completion) adds a verdict "
                 "(`detected` = the row's `passed`); with `judge_id`, every span an llm_judge rule using that judge scores; a "
                 "judge error is stored but not counted, and a span already counted is not counted again. `notify` + destination route the breach and recovery notices (webhook, chat, email); without it they go "
                 "to the tenant's default route (PUT /v1/alerts/default-route), and with neither the latch moves silently. Webhook notices are signed with `secret`, shown only in this answer."))
async def create_behavior(request: web.Request) -> dict[str, Any]:
    data: BehaviorCreate = request["body"]
    if data.kind == "classifier" and not (data.judge_id or data.rule_id):
        raise bad("judge_id", "a classifier needs judge_id or rule_id")
    if data.notify:
        check_destination(data.notify, data.webhook_url, data.slack_channel, data.email_to)
        await check_url(data.webhook_url, "webhook_url")
    store = request.app[STORE]
    await _check_source(store, request["tenant_id"], "judges", data.judge_id, "judge")
    await _check_source(store, request["tenant_id"], "score_rules", data.rule_id, "score rule")
    row = {**data.model_dump(), "id": new_id("bhv_"), "tenant_id": request["tenant_id"], "secret": data.secret or new_secret(),
           "created_at": now_iso()}
    await behavior_store.insert(store, row)
    return behavior_body(await behavior_store.get(store, row["id"]), secret=True)


@routes.get(R.LIST_BEHAVIORS, "List behaviors")
async def list_behaviors(request: web.Request) -> Page[Behavior]:
    sql, params = behavior_store.list_query(request["tenant_id"])
    return await paginate(request.app[STORE], sql, params, request, behavior_body)


@routes.get(R.GET_BEHAVIOR, "One behavior with its latch (breached)", typed=True)
async def get_behavior(request: web.Request) -> dict[str, Any]:
    return behavior_body(await _owned(request))


@routes.delete(R.DELETE_BEHAVIOR, "Delete a behavior, its verdicts and pending notices")
async def delete_behavior(request: web.Request) -> web.Response:
    row = await _owned(request)
    await behavior_store.delete(request.app[STORE], row["id"])
    return web.Response(status=204)


@routes.post(R.POST_VERDICTS, "Record verdicts: one, or {verdicts: [...]} (at most 500)", typed=True, description=(
                 f"Verdicts with `judge_error` are stored but not counted. When the rate over the last {WINDOW} counted "
                 "verdicts (at least 20) crosses `baseline_pct` in `baseline_direction`, the latch sets and one breach notice "
                 "is queued; no other while breached; when the rate is back on the healthy side the latch resets with one "
                 "recovery notice. A classifier with `labels` refuses another label (400 naming `verdicts.N.label`)."))
async def post_verdicts(request: web.Request) -> Reply:
    row = await _owned(request)
    data: VerdictsPost = request["body"]
    items = data.items()
    labels = loads(row["labels"], None)
    for n, verdict in enumerate(items):
        if labels is not None and verdict.label is not None and verdict.label not in labels:
            where = f"verdicts.{n}.label" if data.verdicts is not None else "label"
            raise bad(where, f"'{verdict.label}' is not one of the behavior's labels ({', '.join(labels)})")
    verdicts = [{**v.model_dump(), "tenant_id": row["tenant_id"]} for v in items]
    stats, queued = await latch.record(request.app[STORE], row["id"], verdicts)
    if queued:
        request.app[WORKER].wake()
    return Reply({"accepted": len(items), "stats": stats}, status=201)


@routes.get(R.BEHAVIOR_STATS, f"Rate over the last {WINDOW} counted verdicts, and the latch", typed=True)
async def behavior_stats(request: web.Request) -> dict[str, Any]:
    row = await _owned(request)
    return latch.stats(row, await behavior_store.recent_detections(request.app[STORE], row["id"], WINDOW))


@routes.get(R.BEHAVIOR_DELIVERIES, "Breach and recovery notices with every attempt, newest first")
async def behavior_deliveries(request: web.Request) -> Page[AlertDelivery]:
    row = await _owned(request)
    return await deliveries_page(request, "behavior_id", row["id"])
