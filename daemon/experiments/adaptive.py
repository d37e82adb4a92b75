"""More replicas where the verdict is still undecided (`svc eval run --adaptive N`,
`POST /v1/experiments/{id}/extend`), and where a comparison is still open (`svc eval compare --gate
--adaptive N` names the scenarios: client/gate_adaptive.py).

A scenario is undecided when its replicas disagree (verdict ``flaky``): a few more runs say whether
it mostly passes or mostly fails, and they sharpen the paired gate where it is blind (a scenario
that passed or failed every time says all it can). The N extra runs go round-robin over the
undecided scenarios in matrix order, each new replica with the next replica index and its
deterministic seed, so the extended experiment is the one a larger `replicas` would have made for
those scenarios. The experiment runs again (``created`` -> ``running`` -> ``completed``) and its
verdicts, metrics and comparisons count every replica.
"""
from __future__ import annotations

from typing import Any

from daemon.errors import Conflict, InvalidRequest
from daemon.experiments import seeds
from daemon.store import adaptive as adaptive_store
from daemon.store import experiments as experiment_store
from daemon.store import jobs as job_store


def undecided(scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in scenarios if s.get("verdict") == "flaky"]


def allocate(scenarios: list[dict[str, Any]], runs: int) -> dict[str, int]:
    """Scenario id -> extra replicas: `runs` spread round-robin, in order."""
    added: dict[str, int] = {}
    for n in range(runs if scenarios else 0):
        scenario = scenarios[n % len(scenarios)]
        added[scenario["id"]] = added.get(scenario["id"], 0) + 1
    return added


def named(scenarios: list[dict[str, Any]], scenario_ids: list[str]) -> list[dict[str, Any]]:
    """The scenarios of these ids, in the order named (each once), whatever their verdict."""
    by_id = {s["id"]: s for s in scenarios}
    unknown = [sid for sid in scenario_ids if sid not in by_id]
    if unknown:
        raise InvalidRequest(f"scenario '{unknown[0]}' is not a scenario of this experiment",
                             [{"loc": ["scenario_ids"], "msg": f"unknown scenario {unknown[0]!r}"}])
    return [by_id[sid] for sid in dict.fromkeys(scenario_ids)]


async def extend(service: Any, row: Any, runs: int, secrets: dict[str, str] | None,
                 scenario_ids: list[str] | None = None) -> dict[str, Any]:
    """`runs` more replicas: round-robin over the undecided scenarios in matrix order, or over the
    scenarios named by `scenario_ids` in that order (the gate's --adaptive adds replicas where the
    comparison is still open, deterministic scenarios included)."""
    if row["status"] != "completed":
        raise Conflict(f"experiment '{row['id']}' is {row['status']}; only a completed experiment gets more replicas", row["status"])
    views = await service.scenario_views(row, await experiment_store.scenarios(service.store, row["id"]), include_runs=False)
    targets = named(views, scenario_ids) if scenario_ids else undecided(views)
    added = allocate(targets, runs)
    if not added:
        return {"id": row["id"], "status": row["status"], "added_runs": 0, "undecided": 0, "scenarios": []}
    jobs = await job_store.of_group(service.store, row["id"])
    next_index: dict[str, int] = {}
    for job in jobs:
        next_index[job["scenario_id"]] = max(next_index.get(job["scenario_id"], 0), job["replica_index"] + 1)
    by_id = {s["id"]: s for s in targets}
    job_rows = []
    for scenario_id, n in added.items():
        m = by_id[scenario_id]["index"]
        for r in range(next_index.get(scenario_id, 0), next_index.get(scenario_id, 0) + n):
            job_rows.append((seeds.job_id(), row["tenant_id"], "experiment", row["id"], scenario_id, m, r,
                             seeds.derive_seed(row["base_seed"], m, r), seeds.run_id(), "pending"))
    if not await adaptive_store.add_replicas(service.store, row["id"], job_rows, added):
        fresh = await experiment_store.get(service.store, row["id"])
        raise Conflict(f"experiment '{row['id']}' is {fresh['status']}", fresh["status"])
    await service.run_experiment(await experiment_store.get(service.store, row["id"]), secrets)
    return {"id": row["id"], "status": "running", "added_runs": len(job_rows), "undecided": len(targets),
            "scenarios": [{"scenario_id": sid, "matrix_entry": by_id[sid]["matrix_entry"], "added": n} for sid, n in added.items()]}
