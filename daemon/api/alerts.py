"""Alert rules: create, list, get, delete, their notifications (deliveries) and a test send; the
tenant's default route (for behaviors without their own); the evaluation hook on experiment
completion (and the catch-up at start), the spec `alerts:` hook and the delivery worker."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from daemon.alerts.delivery import DeliveryWorker
from daemon.alerts.evaluation import catch_up, evaluate_experiment
from daemon.alerts.messages import body as notification_body
from daemon.alerts.outbox import notification
from daemon.alerts.conditions import check_destination
from daemon.alerts.rules import build_rule, check_url, create_rule, declared_rules, new_secret, replace_spec_rules
from daemon.app import owned_by_path
from daemon.contract.alerts import AlertCreate, AlertDelivery, AlertRule, DefaultRoutePut
from daemon.contract.common import Page
from daemon.errors import NotFound
from daemon.experiments.groups import COMPLETED_HOOKS_KEY
from daemon.contract import routes as R
from daemon.http import SPEC_CHECK_HOOKS, SPEC_SAVED_HOOKS, STORE, Reply, Routes, paginate
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
    page.items = await delivery_bodies(request.app[STORE], page.items)
    return page


async def _owned(request: web.Request) -> Any:
    return await owned_by_path(request, "alert_id", alert_store.get_rule, "alert")


@routes.post(R.CREATE_ALERT, "Create an alert rule", errors=(409,),
             secret_once="alert", typed=True, description=(
                 "`condition` is `<metric> <operator> <value>`; metrics: pass_rate, mean_wall_ms, p95_wall_ms, total_cost_usd, "
                 "mean_cost_per_run_usd, tool_success_rate, side_effect_violations, mean_tool_calls; operators < <= > >= == !=. "
                 "A bad condition, window or missing destination is 400 naming the field. The 51st rule of a tenant is 409 "
                 "`conflict` with `details.limit: 50`. Webhook notifications are signed with `secret` (X-Svc-Signature, like "
                 "the other webhooks), shown only in this answer."))
async def create_alert(request: web.Request) -> dict[str, Any]:
    data: AlertCreate = request["body"]
    rule = await build_rule(request["tenant_id"], data.model_dump())
    await create_rule(request.app[STORE], rule)
    return rule_body(await alert_store.get_rule(request.app[STORE], rule["id"]), secret=True)


@routes.get(R.LIST_ALERTS, "List alert rules (filter: eval_id)")
async def list_alerts(request: web.Request) -> Page[AlertRule]:
    sql, params = alert_store.list_rules_query(request["tenant_id"], request["query"].eval_id)
    return await paginate(request.app[STORE], sql, params, request, rule_body)


# R.*_ALERT_DEFAULT_ROUTE is a fixed path under /v1/alerts/{alert_id}: mounted first, it wins (rule ids all start alr_).
ROUTE_FIELDS = ("notify", "webhook_url", "slack_channel", "email_to", "updated_at")


def route_body(row: Any, secret: bool = False) -> dict[str, Any]:
    data = {name: row[name] for name in ROUTE_FIELDS}
    if secret:
        data["secret"] = row["secret"]
    return data


@routes.get(R.GET_ALERT_DEFAULT_ROUTE, "The tenant's default notification route (404 when none is set)", typed=True,
            errors=(404,), description="Behaviors without their own `notify` send their breach and recovery notices here.")
async def get_default_route(request: web.Request) -> dict[str, Any]:
    row = await alert_store.get_default_route(request.app[STORE], request["tenant_id"])
    if row is None:
        raise NotFound("default route", "default-route", "no default route is set for this tenant (PUT /v1/alerts/default-route)")
    return route_body(row)


@routes.put(R.PUT_ALERT_DEFAULT_ROUTE, "Set the tenant's default notification route", typed=True,
            description=(
                "Where behaviors without their own `notify` send their breach and recovery notices (SPEC: routing is set at "
                "behavior or workspace level). The route is read when a latch flips. Webhook notices are signed with `secret` "
                "(kept from the previous route when omitted, else generated), shown only in this answer. A missing destination "
                "or an unsafe webhook_url is 400 naming the field."))
async def put_default_route(request: web.Request) -> dict[str, Any]:
    data: DefaultRoutePut = request["body"]
    check_destination(data.notify, data.webhook_url, data.slack_channel, data.email_to)
    await check_url(data.webhook_url, "webhook_url")
    store = request.app[STORE]
    previous = await alert_store.get_default_route(store, request["tenant_id"])
    secret = data.secret or (previous["secret"] if previous is not None else new_secret())
    await alert_store.put_default_route(store, {**data.model_dump(), "tenant_id": request["tenant_id"], "secret": secret,
                                                "updated_at": now_iso()})
    return route_body(await alert_store.get_default_route(store, request["tenant_id"]), secret=True)


@routes.delete(R.DELETE_ALERT_DEFAULT_ROUTE, "Remove the tenant's default route; its pending notices are not sent", errors=(404,))
async def delete_default_route(request: web.Request) -> web.Response:
    if not await alert_store.delete_default_route(request.app[STORE], request["tenant_id"]):
        raise NotFound("default route", "default-route", "no default route is set for this tenant")
    return web.Response(status=204)


@routes.get(R.GET_ALERT, "One alert rule with its state (ok, firing, no_data)", typed=True)
async def get_alert(request: web.Request) -> dict[str, Any]:
    return rule_body(await _owned(request))


@routes.delete(R.DELETE_ALERT, "Delete an alert rule; its pending notifications are not sent")
async def delete_alert(request: web.Request) -> web.Response:
    row = await _owned(request)
    await alert_store.delete_rule(request.app[STORE], row["id"])
    return web.Response(status=204)


@routes.post(R.ROTATE_ALERT_SECRET, "Rotate the rule's webhook signing secret (shown once)",
             secret_once="alert", typed=True, description=(
                 "A new signing secret, in this answer only; the old one stops signing at once. Rules declared by a spec's "
                 "`alerts:` get their first secret this way."))
async def rotate_alert_secret(request: web.Request) -> dict[str, Any]:
    row = await _owned(request)
    await alert_store.set_secret(request.app[STORE], row["id"], new_secret())
    return rule_body(await alert_store.get_rule(request.app[STORE], row["id"]), secret=True)


@routes.get(R.LIST_ALERT_DELIVERIES, "Notifications of a rule with every attempt, newest first")
async def list_alert_deliveries(request: web.Request) -> Page[AlertDelivery]:
    row = await _owned(request)
    return await deliveries_page(request, "rule_id", row["id"])


@routes.post(R.TEST_ALERT, "Send a sample notification to the rule's destination", typed=True, description=(
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
        await catch_up(app[STORE])
        worker.start()
        yield
        await worker.close()

    app.setdefault(COMPLETED_HOOKS_KEY, []).append(on_completed)
    app[SPEC_CHECK_HOOKS].append(on_spec_check)
    app[SPEC_SAVED_HOOKS].append(on_spec_saved)
    app.cleanup_ctx.append(ctx)
