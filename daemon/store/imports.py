"""The SQL of an imported experiment (a baseline bundle brought into this daemon): its experiment
row, scenario rows and finished job rows, written in one transaction."""
from __future__ import annotations

from typing import Any

from daemon.store.db import Store, dumps


async def insert_imported(store: Store, experiment: dict[str, Any], scenarios: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> None:
    e = experiment
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO experiments (id, tenant_id, name, spec_id, spec_version, status, replicas, concurrency, matrix, inputs,"
            " base_seed, filter_failing_from, secret_names, total_runs, error, summary, created_at, started_at, finished_at, imported)"
            " VALUES (?, ?, ?, ?, ?, 'completed', ?, NULL, ?, NULL, ?, NULL, '[]', ?, NULL, ?, ?, ?, ?, ?)",
            (e["id"], e["tenant_id"], e["name"], e["spec_id"], e["spec_version"], e["replicas"], dumps(e["matrix"]), e["base_seed"],
             e["total_runs"], dumps(e["summary"]), e["created_at"], e["started_at"], e["finished_at"], dumps(e["imported"])),
        )
        for s in scenarios:
            await tx.execute(
                "INSERT INTO scenarios (id, experiment_id, tenant_id, matrix_index, matrix_entry, replicas, status, verdict, passed,"
                " score, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (s["id"], e["id"], e["tenant_id"], s["matrix_index"], dumps(s["matrix_entry"]), s["replicas"], s["status"], s["verdict"],
                 s["passed"], s["score"], s["finished_at"]),
            )
        for n, j in enumerate(jobs, 1):
            await tx.execute(
                "INSERT INTO scenario_jobs (id, tenant_id, group_kind, group_id, scenario_id, matrix_index, replica_index, seed, run_id,"
                " previous_run_ids, state, attempts, status, score, error, result, wall_ms, cost_usd, queued_at, started_at,"
                " finished_at, done_seq) VALUES (?, ?, 'experiment', ?, ?, ?, ?, ?, ?, ?, 'done', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (j["id"], e["tenant_id"], e["id"], j["scenario_id"], j["matrix_index"], j["replica_index"], j["seed"], j["run_id"],
                 dumps(j["previous_run_ids"]), j["attempts"], j["status"], j["score"], j["error"], dumps(j["result"]), j["wall_ms"],
                 j["cost_usd"], j["started_at"], j["started_at"], j["finished_at"], n),
            )
