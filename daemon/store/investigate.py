"""Read-only views of one tenant's data for the investigation agent and chat alerts.

Every query is bound to the tenant: the agent's tools can only ever see the asking tenant's rows.
Nothing here writes.
"""
from __future__ import annotations

import json
from typing import Any

from daemon.store.db import Store


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


async def experiments(store: Store, tenant_id: str, limit: int, status: str | None = None) -> list[dict[str, Any]]:
    sql, params = "SELECT id, name, spec_id, spec_version, status, total_runs, error, summary, created_at, finished_at FROM experiments WHERE tenant_id = ?", [tenant_id]
    if status:
        sql, params = sql + " AND status = ?", [*params, status]
    rows = await store.fetchall(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit])
    return [{**dict(r), "summary": _json(r["summary"])} for r in rows]


async def experiment(store: Store, tenant_id: str, experiment_id: str) -> dict[str, Any] | None:
    row = await store.fetchone(
        "SELECT id, name, spec_id, spec_version, status, total_runs, replicas, error, summary, created_at, started_at, finished_at"
        " FROM experiments WHERE id = ? AND tenant_id = ?", (experiment_id, tenant_id))
    return {**dict(row), "summary": _json(row["summary"])} if row is not None else None


async def scenarios(store: Store, tenant_id: str, experiment_id: str, limit: int, failing_only: bool = False) -> list[dict[str, Any]]:
    sql = ("SELECT id, matrix_index, matrix_entry, status, verdict, passed, score, finished_at FROM scenarios"
           " WHERE experiment_id = ? AND tenant_id = ?")
    if failing_only:
        sql += " AND (passed = 0 OR verdict IN ('fail', 'error', 'flaky'))"
    rows = await store.fetchall(sql + " ORDER BY matrix_index LIMIT ?", (experiment_id, tenant_id, limit))
    return [{**dict(r), "matrix_entry": _json(r["matrix_entry"])} for r in rows]


async def runs(store: Store, tenant_id: str, limit: int, experiment_id: str | None = None, scenario_id: str | None = None,
               failing_only: bool = False) -> list[dict[str, Any]]:
    sql, params = ("SELECT id, spec_id, status, verdict, reason, score, seed, experiment_id, scenario_id, duration_ms, created_at"
                   " FROM runs WHERE tenant_id = ?"), [tenant_id]
    if experiment_id:
        sql, params = sql + " AND experiment_id = ?", [*params, experiment_id]
    if scenario_id:
        sql, params = sql + " AND scenario_id = ?", [*params, scenario_id]
    if failing_only:
        sql += " AND verdict IN ('fail', 'error')"
    rows = await store.fetchall(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit])
    return [dict(r) for r in rows]


async def run(store: Store, tenant_id: str, run_id: str) -> dict[str, Any] | None:
    """A run with its scored result: invariant results and their evidence, violations, reproducer."""
    row = await store.fetchone(
        "SELECT id, spec_id, spec_version, status, verdict, reason, score, seed, matrix_entry, experiment_id, scenario_id,"
        " agent, result, duration_ms, created_at, finished_at FROM runs WHERE id = ? AND tenant_id = ?", (run_id, tenant_id))
    if row is None:
        return None
    return {**dict(row), "matrix_entry": _json(row["matrix_entry"]), "agent": _json(row["agent"]), "result": _json(row["result"])}


_SPAN_COLUMNS = ("trace_id, span_id, parent_span_id, ts, event_type, phase, tool, status, error_type, duration_ms, model,"
                 " input_tokens, output_tokens, cost_usd, input, output, run_id, experiment_id, scenario_id, agent")


async def spans(store: Store, tenant_id: str, limit: int, *, trace_id: str | None = None, experiment_id: str | None = None,
                run_id: str | None = None, errors_only: bool = False) -> list[dict[str, Any]]:
    sql, params = f"SELECT {_SPAN_COLUMNS} FROM trace_events WHERE tenant_id = ?", [tenant_id]
    for column, value in (("trace_id", trace_id), ("experiment_id", experiment_id), ("run_id", run_id)):
        if value:
            sql, params = sql + f" AND {column} = ?", [*params, value]
    if errors_only:
        sql += " AND (status = 'error' OR error_type IS NOT NULL)"
    rows = await store.fetchall(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit])
    return [dict(r) for r in rows]


async def alert_span(store: Store, tenant_id: str, experiment_id: str) -> dict[str, Any] | None:
    """The span an alert about an experiment points at: its latest failing span, else its latest
    model call, else its latest span."""
    for extra in (" AND (status = 'error' OR error_type IS NOT NULL)", " AND model IS NOT NULL", ""):
        row = await store.fetchone(
            f"SELECT {_SPAN_COLUMNS} FROM trace_events WHERE experiment_id = ? AND tenant_id = ?{extra} ORDER BY seq DESC LIMIT 1",
            (experiment_id, tenant_id))
        if row is not None:
            return dict(row)
    return None


async def has_table(store: Store, name: str) -> bool:
    row = await store.fetchone("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return row is not None


async def scores(store: Store, tenant_id: str, experiment_id: str, limit: int) -> list[dict[str, Any]] | None:
    """Score rows of an experiment, or None when this daemon has no scores table yet."""
    if not await has_table(store, "scores"):
        return None
    rows = await store.fetchall(
        "SELECT id, scenario_id, trace_id, span_id, rule_id, score, passed, reason, judge_error, created_at FROM scores"
        " WHERE experiment_id = ? AND tenant_id = ? ORDER BY seq DESC LIMIT ?",
        (experiment_id, tenant_id, limit))
    return [dict(r) for r in rows]
