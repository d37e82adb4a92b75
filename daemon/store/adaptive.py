"""The SQL of adding replicas to a finished experiment (`POST /v1/experiments/{id}/extend`): new
pending jobs, the scenarios' replica counts, and the experiment back to `created` to run them."""
from __future__ import annotations

from daemon.store.db import Store


async def add_replicas(store: Store, experiment_id: str, job_rows: list[tuple], added: dict[str, int]) -> bool:
    """`job_rows` as jobs.insert_many takes them (state pending); `added` scenario id -> new replicas.
    False (nothing written) when the experiment is no longer completed."""
    async with store.transaction() as tx:
        changed = await tx.execute(
            "UPDATE experiments SET status = 'created', total_runs = total_runs + ?, finished_at = NULL, summary = NULL"
            " WHERE id = ? AND status = 'completed'",
            (len(job_rows), experiment_id),
        )
        if not changed:
            return False
        await tx.executemany(
            "INSERT INTO scenario_jobs (id, tenant_id, group_kind, group_id, scenario_id, matrix_index, replica_index, seed, run_id, state)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", job_rows,
        )
        for scenario_id, n in added.items():
            await tx.execute("UPDATE scenarios SET replicas = replicas + ?, status = 'created', verdict = NULL, passed = NULL,"
                             " finished_at = NULL WHERE id = ?", (n, scenario_id))
    return True
