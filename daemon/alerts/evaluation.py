"""Rule evaluation after an experiment completes (SPEC "Alert notifications").

Rules of the tenant whose `eval_id` is the experiment's spec or absent; the metric comes from the
summary cached on finished experiments. Windows:
- none: this experiment's metric crosses;
- `last_N_runs`: the spec's last N finished experiments all cross (fewer than N: `no_data`);
- `last_<period>`: the metric over the runs of the spec's experiments finished in that period
  (rates and means weighted by each experiment's run count, totals summed, p95 the largest).
The rule's new state and its outbox row are written in one transaction.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any

from daemon.alerts import settings
from daemon.alerts.conditions import crossed, parse_window
from daemon.alerts.messages import body
from daemon.alerts.outbox import notification
from daemon.errors import InvalidRequest
from daemon.store import alerts as alert_store
from daemon.store.db import loads
from daemon.util import now_iso

log = logging.getLogger("svcd.alerts")
SUMMED = ("total_cost_usd", "side_effect_violations")
WORST = ("p95_wall_ms",)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def combine(metric: str, summaries: list[dict[str, Any]]) -> float | None:
    """`metric` over the runs of several experiments."""
    values = [(s.get(metric), s.get("total_runs") or 0) for s in summaries if s.get(metric) is not None]
    if not values:
        return None
    if metric in SUMMED:
        return float(sum(v for v, _ in values))
    if metric in WORST:
        return float(max(v for v, _ in values))
    runs = sum(n for _, n in values)
    if runs == 0:
        return float(sum(v for v, _ in values) / len(values))
    return float(sum(v * n for v, n in values) / runs)


async def judge(store: Any, rule: Any, experiment: Any, summary: dict[str, Any]) -> tuple[str, float | None]:
    """(state, metric value) of `rule` after `experiment`."""
    metric, op, threshold = rule["metric"], rule["operator"], rule["threshold"]
    try:
        window = parse_window(rule["window"])
    except InvalidRequest:
        window = None
    value = summary.get(metric)
    until = experiment["finished_at"] or now_iso()  # the window ends with this experiment, also when evaluated later
    if window is not None and window.runs is not None:
        recent = await alert_store.last_experiments(store, experiment["tenant_id"], experiment["spec_id"], window.runs, until)
        if len(recent) < window.runs:
            return "no_data", value
        every = all(crossed(loads(r["summary"], {}).get(metric), op, threshold) for r in recent)
        return ("firing" if every else "ok"), value
    if window is not None and window.seconds is not None:
        since = _iso(datetime.fromisoformat(until) - timedelta(seconds=window.seconds))
        rows = await alert_store.experiments_since(store, experiment["tenant_id"], experiment["spec_id"], since, until)
        value = combine(metric, [loads(r["summary"], {}) for r in rows])
    if value is None:
        return "no_data", None
    return ("firing" if crossed(value, op, threshold) else "ok"), value


def reason(rule: Any, value: float) -> str:
    scope = f" over {rule['window']}" if rule["window"] else ""
    return f"{rule['metric']} {value:g} {rule['operator']} {rule['threshold']:g}{scope}"


async def evaluate_experiment(store: Any, experiment_id: str) -> int:
    """Evaluate every matching rule; returns how many notifications were queued."""
    experiment = await alert_store.experiment(store, experiment_id)
    if experiment is None:
        return 0
    summary = loads(experiment["summary"], None) or {}
    rules = await alert_store.rules_for_spec(store, experiment["tenant_id"], experiment["spec_id"])
    verdicts = [(rule, *await judge(store, rule, experiment, summary)) for rule in rules]
    fired_at = now_iso()
    since = _iso(datetime.now(timezone.utc) - timedelta(seconds=settings.DEDUP_WINDOW_S))
    bucket = int(datetime.now(timezone.utc).timestamp() // settings.DEDUP_WINDOW_S)
    queued = 0
    async with store.transaction() as tx:
        for rule, state, value in verdicts:
            fires = state == "firing" and not await alert_store.fired_since(tx, rule["id"], experiment_id, since)
            if fires:
                payload = body(rule["id"], rule["name"], reason(rule, value), experiment_id, experiment["name"], fired_at,
                               value, rule["threshold"])
                row = notification(rule, "alert.fired", f"alert:{rule['id']}:{experiment_id}:{bucket}", payload,
                                   rule_id=rule["id"], experiment_id=experiment_id)
                fires = await alert_store.enqueue(tx, row)
                queued += fires
            await alert_store.set_rule_state(tx, rule["id"], state, fired_at if fires else None)
    return queued


async def catch_up(store: Any) -> int:
    """At daemon start: evaluate again the experiments finished within the dedup window, so one
    whose evaluation a crash cut off (killed between completion and its hook) is not missed. Those
    already evaluated queue nothing new: the same rule and experiment fire at most once in that window."""
    # 30 s short of the window: the dedup check, a little later, still covers every one of them
    since = _iso(datetime.now(timezone.utc) - timedelta(seconds=settings.DEDUP_WINDOW_S - 30))
    queued = 0
    for experiment_id in await alert_store.finished_since(store, since):
        try:
            queued += await evaluate_experiment(store, experiment_id)
        except Exception:
            log.exception("alert evaluation of %s at start failed", experiment_id)
    return queued
