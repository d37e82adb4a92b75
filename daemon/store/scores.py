"""The score_rules, score_jobs and scores tables (009_scores.sql), and the spans of an experiment."""
from __future__ import annotations

from typing import Any, AsyncIterator

from daemon.store.db import Store, dumps, loads
from daemon.traces.query import iter_events

RULE_FIELDS = ("name", "eval_id", "type", "rubric", "pattern", "command", "judge_id", "model", "threshold")


# --- rules ---------------------------------------------------------------------------------------

async def insert_rule(store: Store, rule_id: str, tenant_id: str, fields: dict[str, Any], source: str, now: str) -> None:
    await store.execute(
        "INSERT INTO score_rules (id, tenant_id, name, eval_id, type, rubric, pattern, command, judge_id, model, threshold,"
        " applies_to, source, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (rule_id, tenant_id, *(fields.get(f) for f in RULE_FIELDS), dumps(fields.get("applies_to") or {}), source, now, now),
    )


async def update_rule(store: Store, rule_id: str, fields: dict[str, Any], now: str) -> None:
    sets = ", ".join(f"{f} = ?" for f in RULE_FIELDS)
    await store.execute(
        f"UPDATE score_rules SET {sets}, applies_to = ?, updated_at = ? WHERE id = ?",
        (*(fields.get(f) for f in RULE_FIELDS), dumps(fields.get("applies_to") or {}), now, rule_id),
    )


async def get_rule(store: Store, rule_id: str) -> Any:
    return await store.fetchone("SELECT * FROM score_rules WHERE id = ?", (rule_id,))


async def delete_rule(store: Store, rule_id: str) -> None:
    await store.execute("DELETE FROM score_rules WHERE id = ?", (rule_id,))


async def spec_rules(store: Store, tenant_id: str, eval_id: str) -> list[Any]:
    return await store.fetchall("SELECT * FROM score_rules WHERE tenant_id = ? AND eval_id = ? AND source = 'spec' ORDER BY seq",
                                (tenant_id, eval_id))


async def rules_for_experiment(store: Store, tenant_id: str, spec_id: str, only_eval: bool = False) -> list[Any]:
    """The tenant's rules scoped to `spec_id`, and (unless `only_eval`) those scoped to no spec."""
    if only_eval:
        return await store.fetchall("SELECT * FROM score_rules WHERE tenant_id = ? AND eval_id = ? ORDER BY seq", (tenant_id, spec_id))
    return await store.fetchall("SELECT * FROM score_rules WHERE tenant_id = ? AND (eval_id = ? OR eval_id IS NULL) ORDER BY seq",
                                (tenant_id, spec_id))


async def rules_by_id(store: Store, rule_ids: list[str]) -> list[Any]:
    if not rule_ids:
        return []
    marks = ",".join("?" * len(rule_ids))
    return await store.fetchall(f"SELECT * FROM score_rules WHERE id IN ({marks}) ORDER BY seq", tuple(rule_ids))


def rule_list_sql(tenant_id: str, eval_id: str | None) -> tuple[str, list[Any]]:
    """(sql, params) for daemon.http.paginate."""
    sql, params = "SELECT * FROM score_rules WHERE tenant_id = ?", [tenant_id]
    if eval_id:
        sql += " AND eval_id = ?"
        params.append(eval_id)
    return sql, params


def rule_body(row: Any) -> dict[str, Any]:
    return {"id": row["id"], **{f: row[f] for f in RULE_FIELDS}, "applies_to": loads(row["applies_to"], {}),
            "source": row["source"], "created_at": row["created_at"], "updated_at": row["updated_at"]}


# --- jobs ----------------------------------------------------------------------------------------

async def insert_job(store: Store, job_id: str, tenant_id: str, experiment_id: str, rule_ids: list[str], trigger: str, now: str) -> None:
    await store.execute(
        "INSERT INTO score_jobs (id, tenant_id, experiment_id, rule_ids, trigger, status, created_at) VALUES (?, ?, ?, ?, ?, 'queued', ?)",
        (job_id, tenant_id, experiment_id, dumps(rule_ids), trigger, now),
    )


async def get_job(store: Store, job_id: str) -> Any:
    return await store.fetchone("SELECT * FROM score_jobs WHERE id = ?", (job_id,))


async def unfinished_jobs(store: Store) -> list[Any]:
    return await store.fetchall("SELECT * FROM score_jobs WHERE status IN ('queued', 'running') ORDER BY seq")


async def start_job(store: Store, job_id: str, total: int, now: str) -> None:
    await store.execute(
        "UPDATE score_jobs SET status = 'running', total = ?, attempts = attempts + 1, started_at = COALESCE(started_at, ?) WHERE id = ?",
        (total, now, job_id),
    )


async def count_job_rows(store: Store, job_id: str) -> tuple[int, int]:
    row = await store.fetchone("SELECT COUNT(*) AS n, COALESCE(SUM(judge_error IS NOT NULL), 0) AS errors FROM scores WHERE job_id = ?",
                               (job_id,))
    return row["n"], row["errors"]


async def set_progress(store: Store, job_id: str, done: int, errors: int) -> None:
    await store.execute("UPDATE score_jobs SET done = ?, errors = ? WHERE id = ?", (done, errors, job_id))


async def finish_job(store: Store, job_id: str, status: str, error: str | None, now: str) -> None:
    await store.execute("UPDATE score_jobs SET status = ?, error = ?, finished_at = ? WHERE id = ?", (status, error, now, job_id))


def job_body(row: Any) -> dict[str, Any]:
    return {"id": row["id"], "experiment_id": row["experiment_id"], "rule_ids": loads(row["rule_ids"], []), "trigger": row["trigger"],
            "status": row["status"], "total": row["total"], "done": row["done"], "errors": row["errors"], "error": row["error"],
            "created_at": row["created_at"], "started_at": row["started_at"], "finished_at": row["finished_at"]}


# --- score rows ----------------------------------------------------------------------------------

SCORE_COLUMNS = ("id", "tenant_id", "job_id", "experiment_id", "scenario_id", "trace_id", "span_id", "rule_id", "score", "passed",
                 "reason", "judge_error", "created_at")


async def append_scores(store: Store, rows: list[dict[str, Any]]) -> None:
    """Rows already written by the same job for the same span and rule are ignored (a resumed job)."""
    if not rows:
        return
    await store.executemany(
        f"INSERT OR IGNORE INTO scores ({', '.join(SCORE_COLUMNS)}) VALUES ({', '.join('?' * len(SCORE_COLUMNS))})",
        [_stored(r) for r in rows],
    )


def _stored(row: dict[str, Any]) -> tuple:
    passed, error = row.get("passed"), row.get("judge_error")
    values = {**row, "passed": None if passed is None else int(bool(passed)), "judge_error": None if error is None else dumps(error)}
    return tuple(values[c] for c in SCORE_COLUMNS)


async def scored_pairs(store: Store, job_id: str) -> set[tuple[str, str]]:
    rows = await store.fetchall("SELECT span_id, rule_id FROM scores WHERE job_id = ?", (job_id,))
    return {(r["span_id"], r["rule_id"]) for r in rows}


def score_list_sql(tenant_id: str, experiment_id: str, rule_id: str | None, every: bool) -> tuple[str, list[Any]]:
    """(sql, params) for daemon.http.paginate: the latest row per (span, rule) unless `every`."""
    sql, params = "SELECT * FROM scores s WHERE s.tenant_id = ? AND s.experiment_id = ?", [tenant_id, experiment_id]
    if rule_id:
        sql += " AND s.rule_id = ?"
        params.append(rule_id)
    if not every:
        sql += " AND s.seq IN (SELECT MAX(seq) FROM scores WHERE experiment_id = ? GROUP BY span_id, rule_id)"
        params.append(experiment_id)
    return sql, params


async def experiment_scores(store: Store, tenant_id: str, experiment_id: str, every: bool = False,
                            limit: int | None = None) -> list[Any]:
    sql, params = score_list_sql(tenant_id, experiment_id, None, every)
    sql += " ORDER BY s.seq"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return await store.fetchall(sql, params)


async def aggregates(store: Store, tenant_id: str, experiment_id: str, every: bool = False) -> list[Any]:
    """Per rule over the latest rows (every row with `every`): n, passed, scored, errors, mean score."""
    sql, params = score_list_sql(tenant_id, experiment_id, None, every)
    inner = sql.replace("SELECT * FROM", "SELECT s.rule_id, s.score, s.passed, s.judge_error FROM", 1)
    return await store.fetchall(
        "SELECT l.rule_id, r.name, r.type, COUNT(*) AS n, COALESCE(SUM(l.passed = 1), 0) AS passed,"
        " COUNT(l.score) AS scored, COALESCE(SUM(l.judge_error IS NOT NULL), 0) AS errors, AVG(l.score) AS mean_score"
        f" FROM ({inner}) l LEFT JOIN score_rules r ON r.id = l.rule_id GROUP BY l.rule_id ORDER BY l.rule_id",
        params,
    )


def score_body(row: Any) -> dict[str, Any]:
    passed = row["passed"]
    return {"id": row["id"], "experiment_id": row["experiment_id"], "scenario_id": row["scenario_id"], "trace_id": row["trace_id"],
            "span_id": row["span_id"], "rule_id": row["rule_id"], "score": row["score"],
            "passed": None if passed is None else bool(passed), "reason": row["reason"],
            "judge_error": loads(row["judge_error"], None), "created_at": row["created_at"]}


# --- spans ---------------------------------------------------------------------------------------

async def experiment_spans(store: Store, tenant_id: str, experiment_id: str) -> AsyncIterator[dict[str, Any]]:
    """Every span of the experiment's traces (its runs' events, or events stamped with it), oldest
    first; `scenario_id` falls back to the run's scenario."""
    scenario_of = {r["run_id"]: r["scenario_id"] for r in await store.fetchall(
        "SELECT run_id, scenario_id FROM scenario_jobs WHERE group_id = ?", (experiment_id,))}
    where = " AND (run_id IN (SELECT run_id FROM scenario_jobs WHERE group_id = ?) OR experiment_id = ?)"
    async for span in iter_events(store, tenant_id, where, [experiment_id, experiment_id], order="asc", head_only=True):
        if span.get("scenario_id") is None:
            span["scenario_id"] = scenario_of.get(span.get("run_id"))
        yield span


async def experiment(store: Store, experiment_id: str) -> Any:
    return await store.fetchone("SELECT id, tenant_id, spec_id, status FROM experiments WHERE id = ?", (experiment_id,))


async def rule_count(store: Store, tenant_id: str) -> int:
    row = await store.fetchone("SELECT COUNT(*) AS n FROM score_rules WHERE tenant_id = ?", (tenant_id,))
    return row["n"]


async def unfinished_job_count(store: Store, tenant_id: str) -> int:
    row = await store.fetchone("SELECT COUNT(*) AS n FROM score_jobs WHERE tenant_id = ? AND status IN ('queued', 'running')",
                               (tenant_id,))
    return row["n"]


async def judge_error_rate(store: Store, experiment_id: str) -> float | None:
    """Rows with a judge_error / rows, over the latest row per (span, rule); None without scores."""
    row = await store.fetchone(
        "SELECT COUNT(*) AS n, COALESCE(SUM(judge_error IS NOT NULL), 0) AS errors FROM scores WHERE experiment_id = ?"
        " AND seq IN (SELECT MAX(seq) FROM scores WHERE experiment_id = ? GROUP BY span_id, rule_id)",
        (experiment_id, experiment_id),
    )
    return row["errors"] / row["n"] if row["n"] else None
