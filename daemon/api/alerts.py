"""Alert rules: create, list, get, delete, their notifications (deliveries) and a test send; the
evaluation hook on experiment completion, the spec `alerts:` hook and the delivery worker."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from daemon.alerts.delivery import DeliveryWorker
from daemon.alerts.evaluation import evaluate_experiment
from daemon.alerts.messages import body as notification_body
from daemon.alerts.outbox import notification
from daemon.alerts.rules import build_rule, create_rule, declared_rules, new_secret, replace_spec_rules
from daemon.app import owned_by_path
from daemon.contract.alerts import AlertCreate, AlertDelivery, AlertListQuery, AlertRule, AlertTestAccepted
from daemon.contract.common import Page, PageQuery
from daemon.experiments.groups import COMPLETED_HOOKS_KEY
from daemon.http import SPEC_CHECK_HOOKS, SPEC_SAVED_HOOKS, STORE, Reply, Routes, paginate, parse_body
from daemon.store import alerts as alert_store
from daemon.util import new_id, now_iso

routes = Routes("alerts")
WORKER = web.AppKey("alerts.worker", DeliveryWorker)
RULE_FIELDS = tuple(AlertRule.model_fields)


def rule_body(row: Any, secret: bool = False) -> dict[str, Any]:
    data = {name: row[name] for name in RULE_FIELDS if name != "secret"}
    if secret:
        data["secret"] = row["secret"]
    return data


async def delivery_bodies(store: Any, rows: list[Any]) -> list[dict[str, Any]]:
    attempts = await alert_store.attempts_of(store, [r["id"] for r in rows])
    return [{
        **{name: row[name] for name in AlertDelivery.model_fields if name not in ("payload", "attempt_log")},
        "payload": alert_store.payload_of(row),
        "attempt_log": [{"attempt": a["attempt"], "at": a["at"], "response_status": a["response_status"], "error": a["error"]}
                        for a in attempts.get(row["id"], [])],
    } for row in rows]


async def deliveries_page(request: web.Request, column: str, owner_id: str) -> Page[AlertDelivery]:
    """A page of the notifications whose `column` (rule_id, behavior_id) is `owner_id`, with their attempts."""
    sql, params = alert_store.deliveries_query(column, owner_id)
    page = await paginate(request.app[STORE], sql, params, request, lambda r: r)
    page["items"] = await delivery_bodies(request.app[STORE], page["items"])
    return page


async def _owned(request: web.Request) -> Any:
    return await owned_by_path(request, "alert_id", alert_store.get_rule, "alert")


@routes.post("/v1/alerts", "Create an alert rule", body=AlertCreate, response=AlertRule, status=201, errors=(409,),
             secret_once="alert", typed=True, description=(
                 "`condition` is `<metric> <operator> <value>`; metrics: pass_rate, mean_wall_ms, p95_wall_ms, total_cost_usd, "
                 "mean_cost_per_run_usd, tool_success_rate, side_effect_violations, mean_tool_calls; operators < <= > >= == !=. "
                 "A bad condition, window or missing destination is 400 naming the field. The 51st rule of a tenant is 409 "
                 "`conflict` with `details.limit: 50`. Webhook notifications are signed with `secret` (X-Svc-Signature, like "
                 "the other webhooks), shown only in this answer."))
async def create_alert(request: web.Request) -> dict[str, Any]:
    data = await parse_body(request, AlertCreate)
    rule = await build_rule(request["tenant_id"], data.model_dump())
    await create_rule(request.app[STORE], rule)
    return rule_body(await alert_store.get_rule(request.app[STORE], rule["id"]), secret=True)


@routes.get("/v1/alerts", "List alert rules (filter: eval_id)", response=AlertRule, paginated=True, query=AlertListQuery)
async def list_alerts(request: web.Request) -> Page[AlertRule]:
    sql, params = alert_store.list_rules_query(request["tenant_id"], request["query"].eval_id)
    return await paginate(request.app[STORE], sql, params, request, rule_body)


@routes.get("/v1/alerts/{alert_id}", "One alert rule with its state (ok, firing, no_data)", response=AlertRule, typed=True)
async def get_alert(request: web.Request) -> dict[str, Any]:
    return rule_body(await _owned(request))


@routes.delete("/v1/alerts/{alert_id}", "Delete an alert rule; its pending notifications are not sent")
async def delete_alert(request: web.Request) -> web.Response:
    row = await _owned(request)
    await alert_store.delete_rule(request.app[STORE], row["id"])
    return web.Response(status=204)


@routes.post("/v1/alerts/{alert_id}/secret", "Rotate the rule's webhook signing secret (shown once)", response=AlertRule,
             secret_once="alert", typed=True, description=(
                 "A new signing secret, in this answer only; the old one stops signing at once. Rules declared by a spec's "
                 "`alerts:` get their first secret this way."))
async def rotate_alert_secret(request: web.Request) -> dict[str, Any]:
    row = await _owned(request)
    await alert_store.set_secret(request.app[STORE], row["id"], new_secret())
    return rule_body(await alert_store.get_rule(request.app[STORE], row["id"]), secret=True)


@routes.get("/v1/alerts/{alert_id}/deliveries", "Notifications of a rule with every attempt, newest first",
            response=AlertDelivery, paginated=True, query=PageQuery)
async def list_alert_deliveries(request: web.Request) -> Page[AlertDelivery]:
    row = await _owned(request)
    return await deliveries_page(request, "rule_id", row["id"])


@routes.post("/v1/alerts/{alert_id}/test", "Send a sample notification to the rule's destination", response=AlertTestAccepted,
             status=202, typed=True, description=(
                 "Queues a sample notification (event `alert.test`) and makes its first attempt before answering; retries "
                 "continue in the background. The answer is the notification after that attempt."))
async def test_alert(request: web.Request) -> Reply:
    rule = await _owned(request)
    payload = notification_body(rule["id"], rule["name"], f"test notification for '{rule['condition']}'", None, None, now_iso(),
                                rule["threshold"], rule["threshold"])
    row = notification(rule, "alert.test", f"test:{new_id('')}", payload, rule_id=rule["id"])
    store = request.app[STORE]
    async with store.transaction() as tx:
        await alert_store.enqueue(tx, row)
    await request.app[WORKER].send_now(row["id"])
    [delivery] = await delivery_bodies(store, [await alert_store.get_outbox(store, row["id"])])
    return Reply({"delivery": delivery}, status=202)


def setup(app: web.Application) -> None:
    async def on_completed(app: web.Application, experiment_id: str, status: str) -> None:
        if await evaluate_experiment(app[STORE], experiment_id):
            app[WORKER].wake()

    async def on_spec_check(app: web.Application, tenant_id: str, document: Any) -> None:
        await declared_rules(app[STORE], tenant_id, document)

    async def on_spec_saved(app: web.Application, tenant_id: str, document: Any) -> None:
        await replace_spec_rules(app[STORE], tenant_id, document)

    async def ctx(app: web.Application):
        worker = DeliveryWorker(app)
        app[WORKER] = worker
        worker.start()
        yield
        await worker.close()

    app.setdefault(COMPLETED_HOOKS_KEY, []).append(on_completed)
    app[SPEC_CHECK_HOOKS].append(on_spec_check)
    app[SPEC_SAVED_HOOKS].append(on_spec_saved)
    app.cleanup_ctx.append(ctx)
