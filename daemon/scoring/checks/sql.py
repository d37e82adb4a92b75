"""``sql {service, query, expect_rows | expect_scalar | expect}`` against a postgres service.

The query runs through ``psql`` inside the service container (local socket, the service's
``POSTGRES_USER`` / ``POSTGRES_DB``), wrapped as ``SELECT json_agg(q) FROM (<query>) q`` so values
keep their types. A statement that cannot be wrapped (``SHOW``, DML with ``RETURNING``) is run as is
and read as CSV text. Values compare loosely: ``3 == "3"``, ``1.0 == 1``."""
from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING, Any

from daemon.bounded import WorkTimeout, run_bounded
from daemon.scoring.checks.context import CheckContext, CheckOutcome, outcome

if TYPE_CHECKING:
    from daemon.sandbox.handle import Sandbox

ROW_SAMPLE = 20


def loose_eq(actual: Any, expected: Any) -> bool:
    if actual == expected and type(actual) is type(expected):
        return True
    if isinstance(actual, bool) or isinstance(expected, bool):
        truthy = {"t": True, "true": True, "f": False, "false": False}
        a = truthy.get(str(actual).lower(), actual) if not isinstance(actual, bool) else actual
        e = truthy.get(str(expected).lower(), expected) if not isinstance(expected, bool) else expected
        return a == e
    if actual is None or expected is None:
        return actual is None and expected is None
    try:
        return float(actual) == float(expected)
    except (TypeError, ValueError):
        pass
    if isinstance(actual, (dict, list)) or isinstance(expected, (dict, list)):
        return actual == expected
    return str(actual) == str(expected)


def rows_match(rows: list[dict[str, Any]], expected: list[Any]) -> tuple[bool, str | None]:
    if len(rows) != len(expected):
        return False, f"expected {len(expected)} rows, got {len(rows)}"
    for i, (row, want) in enumerate(zip(rows, expected)):
        if isinstance(want, dict):
            for column, value in want.items():
                if column not in row:
                    return False, f"row {i}: no column '{column}' (columns: {', '.join(row)})"
                if not loose_eq(row[column], value):
                    return False, f"row {i}: {column} = {row[column]!r}, expected {value!r}"
        else:
            values = list(row.values())
            if len(values) != len(want):
                return False, f"row {i}: {len(values)} columns, expected {len(want)}"
            for j, (got, value) in enumerate(zip(values, want)):
                if not loose_eq(got, value):
                    return False, f"row {i} column {j}: {got!r}, expected {value!r}"
    return True, None


def judge(check, rows: list[dict[str, Any]]) -> tuple[bool, dict[str, Any]]:
    evidence: dict[str, Any] = {"row_count": len(rows), "rows": rows[:ROW_SAMPLE]}
    if check.expect_rows is not None:
        evidence["expected_rows"] = check.expect_rows
        return len(rows) == check.expect_rows, evidence
    if check.expect is not None:
        ok, why = rows_match(rows, check.expect)
        evidence["expected"] = check.expect
        if why:
            evidence["mismatch"] = why
        return ok, evidence
    value = next(iter(rows[0].values()), None) if rows else None
    evidence["value"] = value
    evidence["expected_scalar"] = check.expect_scalar
    return bool(rows) and loose_eq(value, check.expect_scalar), evidence


def credentials(sandbox: Sandbox, spec: Any, service: str) -> tuple[str, str]:
    """(user, database) of a postgres service: as the sandbox configured it, else from its env.
    Under the db audit the read-only check role (db_audit.CHECK_ROLE, search_path pg_catalog,
    public): the agent may have made functions and views, and none of them runs as the superuser."""
    try:
        plan = sandbox.service_plan(service)
        if plan.user and plan.database:
            return plan.check_user or plan.user, plan.database
    except Exception:  # noqa: BLE001 - fall back to the spec
        pass
    env = dict(getattr(spec.service(service), "env", {}) or {})
    return env.get("POSTGRES_USER") or "postgres", env.get("POSTGRES_DB") or "postgres"


async def run_query(ctx: CheckContext, service: str, query: str, timeout_s: float = 60) -> tuple[list[dict] | None, str | None]:
    """(rows, None) or (None, error text)."""
    user, db = credentials(ctx.sandbox, ctx.spec, service)
    body = query.strip().rstrip(";").strip()
    base = ["psql", "-X", "-q", "-U", user, "-d", db, "-v", "ON_ERROR_STOP=1"]
    wrapped = f"SELECT coalesce(json_agg(q), '[]'::json) FROM ({body}\n) q"
    result = await ctx.sandbox.service_exec(service, [*base, "-At", "-c", wrapped], timeout_s=timeout_s)
    if result.exit_code == 0:
        try:
            rows = await run_bounded(_parse_json_rows, result.stdout, what="parsing the query's output")
            return rows, None
        except (ValueError, RecursionError) as exc:
            return None, f"cannot parse psql output: {str(exc)[:300]}"
    result = await ctx.sandbox.service_exec(service, [*base, "--csv", "-c", body], timeout_s=timeout_s)
    if result.exit_code != 0:
        return None, (result.stderr or result.stdout or f"psql exited {result.exit_code}").strip()
    return await run_bounded(_parse_csv_rows, result.stdout, what="parsing the query's output"), None


def _parse_json_rows(stdout: str) -> list[dict]:
    rows = json.loads(stdout.strip() or "[]")
    if not isinstance(rows, list):
        raise ValueError("expected a JSON array of rows")
    return [r if isinstance(r, dict) else {"value": r} for r in rows]


def _parse_csv_rows(stdout: str) -> list[dict]:
    reader = list(csv.reader(io.StringIO(stdout)))
    if not reader:
        return []
    header, data = reader[0], reader[1:]
    return [dict(zip(header, row)) for row in data]


async def evaluate(check, ctx: CheckContext) -> CheckOutcome:
    try:
        rows, error = await run_query(ctx, check.service, check.query)
    except WorkTimeout as exc:
        return outcome("failed", {"service": check.service, "query": check.query, **exc.evidence()})
    if error is not None:
        return outcome("failed", {"service": check.service, "query": check.query, "error": ctx.tail(error, 1000)})
    ok, evidence = judge(check, rows)
    return outcome("passed" if ok else "failed", {"service": check.service, "query": check.query, **evidence})
