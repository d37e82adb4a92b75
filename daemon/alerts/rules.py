"""Creating alert rules (API and spec `alerts:`), within the per-tenant limit."""
from __future__ import annotations

import secrets as _secrets
from typing import Any

from daemon.alerts import settings
from daemon.alerts.conditions import bad, check_destination, parse_condition, parse_window
from daemon.contract.alerts import MAX_ALERTS_PER_TENANT
from daemon.errors import Conflict
from daemon.netguard import ALLOW_HINT, UnsafeURL, check_outbound_url
from daemon.store import alerts as alert_store
from daemon.util import new_id, now_iso


def new_secret() -> str:
    return "whsec_" + _secrets.token_urlsafe(24)


async def check_url(url: str | None, field: str) -> None:
    if url is None:
        return
    try:
        await check_outbound_url(url)
    except UnsafeURL as exc:
        raise bad(field, f"{exc}; {ALLOW_HINT}")


async def build_rule(tenant_id: str, fields: dict[str, Any], source: str = "api", prefix: str = "") -> dict[str, Any]:
    """A rule row from request-shaped fields; 400 naming `prefix + field` when something is wrong."""
    metric, op, threshold = parse_condition(fields["condition"], prefix + "condition")
    parse_window(fields.get("window"), prefix + "window")
    check_destination(fields["notify"], fields.get("webhook_url"), fields.get("slack_channel"), fields.get("email_to"), prefix)
    await check_url(fields.get("webhook_url"), prefix + "webhook_url")
    return {
        "id": new_id("alr_"), "tenant_id": tenant_id, "name": fields["name"], "eval_id": fields.get("eval_id"),
        "condition": fields["condition"].strip(), "metric": metric, "operator": op, "threshold": threshold,
        "window": fields.get("window"), "notify": fields["notify"], "slack_channel": fields.get("slack_channel"),
        "webhook_url": fields.get("webhook_url"), "email_to": fields.get("email_to"),
        "secret": fields.get("secret") or new_secret(), "source": source, "state": "no_data", "created_at": now_iso(),
    }


def _limit() -> Conflict:
    return Conflict(f"a tenant has at most {MAX_ALERTS_PER_TENANT} alert rules", "limit_reached", limit=MAX_ALERTS_PER_TENANT)


async def create_rule(store: Any, rule: dict[str, Any]) -> None:
    async with store.transaction() as tx:
        if await alert_store.count_rules(tx, rule["tenant_id"]) >= MAX_ALERTS_PER_TENANT:
            raise _limit()
        await alert_store.insert_rule(tx, rule)


async def declared_rules(store: Any, tenant_id: str, document: Any) -> list[dict[str, Any]]:
    """Spec check hook (before the upload is stored): the rules the spec's `alerts:` declare, or
    400 naming `alerts.N.field` / 409 when they would take the tenant past its limit."""
    rules = []
    for n, alert in enumerate(document.alerts):
        fields = {**alert.model_dump(), "eval_id": document.id}
        if alert.notify == "email":
            if not settings.spec_email_to():
                raise bad(f"alerts.{n}.notify", "notify: email in a spec needs SERVICE_ALERT_EMAIL_TO set on the daemon "
                                                "(a spec alert has no email_to)")
            fields["email_to"] = settings.spec_email_to()
        rules.append(await build_rule(tenant_id, fields, "spec", f"alerts.{n}."))
    previous = len(await alert_store.spec_rules(store, tenant_id, document.id))
    if await alert_store.count_rules(store, tenant_id) - previous + len(rules) > MAX_ALERTS_PER_TENANT:
        raise _limit()
    return rules


async def replace_spec_rules(store: Any, tenant_id: str, document: Any) -> None:
    """Spec saved hook: the spec's `alerts:` replace the rules its previous upload declared (matched by name:
    a kept name keeps its rule id, state and notifications; a dropped name is deleted)."""
    rules = await declared_rules(store, tenant_id, document)
    async with store.transaction() as tx:
        previous: dict[str, list[Any]] = {}
        for row in await alert_store.spec_rules(tx, tenant_id, document.id):
            previous.setdefault(row["name"], []).append(row)
        if await alert_store.count_rules(tx, tenant_id) - sum(map(len, previous.values())) + len(rules) > MAX_ALERTS_PER_TENANT:
            raise _limit()
        for rule in rules:
            same_name = previous.get(rule["name"])
            if same_name:  # the same alert, maybe redefined: it keeps its id, state and notifications
                await alert_store.redefine_rule(tx, same_name.pop(0)["id"], rule)
            else:
                await alert_store.insert_rule(tx, rule)
        for rows in previous.values():
            for row in rows:
                await alert_store.delete_rule(tx, row["id"])
