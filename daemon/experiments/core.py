"""Experiments: creation (matrix, replicas, seeds, --filter-failing), run, cancel, RunResults."""
from __future__ import annotations

import re
from typing import Any

from daemon.errors import Conflict, InvalidRequest
from daemon.datasets import experiments as dataset_experiments
from daemon.experiments import seeds
from daemon.experiments.groups import GroupContext, GroupFailed
from daemon.experiments.metrics import summary_for, trace_costs, trace_ids_by_run
from daemon.experiments.results import TERMINAL_EXPERIMENT, experiment_record, run_metrics, scenario_view, verdict_counts
from daemon.experiments.gate import overall_pass_k
from daemon.experiments.service import ExperimentService
from daemon.spec import SpecDocument
from daemon.store import datasets as dataset_store
from daemon.store import experiments as experiment_store
from daemon.store import jobs as job_store
from daemon.store.db import Store, dumps, loads
from daemon.util import now_iso

MAX_RUNS_PER_EXPERIMENT = 10_000
PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FAILING_VERDICTS = ("fail", "flaky", "error")
EXPERIMENT_STATUSES = ("created", "running", "completed", "failed", "cancelled")


def validate_matrix(matrix: list[dict[str, Any]], loc: str = "matrix") -> list[dict[str, Any]]:
    for i, entry in enumerate(matrix):
        if not entry:
            raise InvalidRequest(f"{loc}.{i}: a matrix entry must set at least one parameter", [{"loc": f"{loc}.{i}", "msg": "empty entry"}])
        for key in entry:
            if not PARAM_NAME.match(key):
                raise InvalidRequest(f"{loc}.{i}: invalid matrix parameter name '{key}': use letters, digits and '_'",
                                     [{"loc": f"{loc}.{i}.{key}", "msg": "invalid parameter name"}])
    return matrix


async def failing_entries(store: Store, tenant_id: str, source_id: str, spec_id: str) -> list[dict[str, Any]]:
    """Matrix entries of the scenarios that did not pass in ``source_id`` (fail, flaky, error)."""
    from daemon.errors import Forbidden, NotFound

    source = await experiment_store.get(store, source_id)
    if source is None:
        raise NotFound("experiment", source_id)
    if source["tenant_id"] != tenant_id:
        raise Forbidden(f"experiment '{source_id}' belongs to another tenant")
    if source["spec_id"] != spec_id:
        raise InvalidRequest(
            f"filter_failing_from: experiment '{source_id}' ran spec '{source['spec_id']}', not '{spec_id}'",
            [{"loc": "filter_failing_from", "msg": "different spec"}],
        )
    if source["status"] in ("created", "running"):
        raise Conflict(f"experiment '{source_id}' is {source['status']}; wait until it finishes to re-run its failures", source["status"])
    return [loads(entry, {}) for entry in await experiment_store.failing_matrix_entries(store, source_id)]


async def create_experiment(service: ExperimentService, *, tenant_id: str, spec_record: dict[str, Any], spec: SpecDocument,
                            name: str, secrets: dict[str, str] | None, replicas: int | None, concurrency: int | None,
                            matrix: list[dict[str, Any]] | None, inputs: dict[str, Any] | None, seed: str | None,
                            filter_failing_from: str | None, dataset_version: int | None = None) -> dict[str, Any]:
    store = service.store
    n_replicas = replicas or spec.parallelism.replicas
    if filter_failing_from:
        entries = await failing_entries(store, tenant_id, filter_failing_from, spec_record["id"])
    elif matrix is not None:
        entries = validate_matrix(matrix) or [{}]
    else:
        entries = spec.matrix_entries()
    dataset = None  # the dataset version the scenarios are records of
    if filter_failing_from:
        dataset = await dataset_store.experiment_dataset(store, filter_failing_from)
    elif spec.parallelism.dataset is not None:
        ref = spec.parallelism.dataset.model_copy(update={"version": dataset_version}) if dataset_version else spec.parallelism.dataset
        entries, dataset = await dataset_experiments.expand(store, tenant_id, ref, entries)
    if dataset_version and spec.parallelism.dataset is None:
        raise InvalidRequest("dataset_version: the spec has no parallelism.dataset", [{"loc": "dataset_version", "msg": "no dataset in the spec"}])
    total = n_replicas * len(entries)
    if total > MAX_RUNS_PER_EXPERIMENT:
        raise InvalidRequest(
            f"replicas: {n_replicas} replicas x {len(entries)} matrix entries = {total} runs, more than {MAX_RUNS_PER_EXPERIMENT} per experiment",
            [{"loc": "replicas", "msg": f"total runs above {MAX_RUNS_PER_EXPERIMENT}"}],
        )
    experiment_id = seeds.experiment_id()
    base_seed = seed or experiment_id
    now = now_iso()
    async with store.transaction() as tx:
        await experiment_store.insert(
            tx, experiment_id=experiment_id, tenant_id=tenant_id, name=name, spec_record=spec_record, replicas=n_replicas,
            concurrency=concurrency, matrix=entries, inputs=inputs, base_seed=base_seed, filter_failing_from=filter_failing_from,
            secret_names=sorted(secrets or {}), total_runs=total, now=now,
        )
        scenario_rows, job_rows = [], []
        for m, entry in enumerate(entries):
            scenario_id = seeds.scenario_id()
            scenario_rows.append((scenario_id, experiment_id, tenant_id, m, dumps(entry), n_replicas, "created"))
            for r in range(n_replicas):
                job_rows.append((seeds.job_id(), tenant_id, "experiment", experiment_id, scenario_id, m, r,
                                 seeds.derive_seed(base_seed, m, r), seeds.run_id(), "pending"))
        await experiment_store.insert_scenarios(tx, scenario_rows)
        await job_store.insert_many(tx, job_rows)
        if dataset is not None:
            await dataset_store.link_experiment(tx, experiment_id, dataset)
    ctx = GroupContext("experiment", experiment_id, tenant_id, spec_record, spec, inputs, concurrency, sorted(secrets or {}))
    service.remember(ctx, secrets)
    return dict(await experiment_store.get(store, experiment_id))


async def run_experiment(service: ExperimentService, row: Any, secrets: dict[str, str] | None) -> dict[str, Any]:
    store = service.store
    if row["status"] != "created":
        verb = "is already running" if row["status"] == "running" else f"is {row['status']}"
        raise Conflict(f"experiment '{row['id']}' {verb}; create a new experiment to run again", row["status"])
    service.contexts.pop(row["id"], None)  # reload: the spec version may have gone since creation
    try:
        ctx = await service.context(row["id"])
    except GroupFailed as exc:  # e.g. its spec version was deleted: the experiment cannot proceed
        await service.fail_group(row["id"], "experiment", str(exc))
        raise Conflict(f"experiment '{row['id']}' cannot run and is now failed: {exc}", "failed")
    count = await experiment_store.start(store, row["id"], now_iso())
    if not count:
        fresh = await experiment_store.get(store, row["id"])
        raise Conflict(f"experiment '{row['id']}' is {fresh['status']}", fresh["status"])
    if secrets:
        held = dict(service.secrets.get(row["id"], {}))
        held.update(secrets)
        service.secrets[row["id"]] = held
        names = sorted(set(ctx.secret_names) | set(secrets))
        ctx.secret_names = names
        await experiment_store.set_secret_names(store, row["id"], names)
    service.events.publish(f"experiment:{row['id']}", {"type": "status", "experiment_id": row["id"], "status": "running"})
    await service.enqueue_group(ctx)
    return {"id": row["id"], "status": "running", "total_runs": row["total_runs"]}


async def cancel_experiment(service: ExperimentService, row: Any) -> None:
    if row["status"] in TERMINAL_EXPERIMENT:
        raise Conflict(f"experiment '{row['id']}' is already {row['status']}", row["status"])
    count = await experiment_store.cancel(service.store, row["id"], now_iso())
    if not count:
        fresh = await experiment_store.get(service.store, row["id"])
        raise Conflict(f"experiment '{row['id']}' is already {fresh['status']}", fresh["status"])
    service.events.publish(f"experiment:{row['id']}", {"type": "status", "experiment_id": row["id"], "status": "cancelled"})
    await service.cancel_group(row["id"])


async def aggregation_of(service: ExperimentService, row: Any) -> tuple[str, float | None, float | None]:
    try:
        ctx = await service.context(row["id"]) if row["status"] not in TERMINAL_EXPERIMENT else None
    except Exception:
        ctx = None
    spec = ctx.spec if ctx is not None else None
    if spec is None:
        from daemon.spec import load_spec
        from daemon.store import specs as spec_store

        record = await spec_store.get(service.store, row["tenant_id"], row["spec_id"], row["spec_version"])
        if record is not None:
            try:
                spec = load_spec(record["yaml"], f"{record['id']}.yaml")
            except Exception:
                spec = None
    if spec is None:
        return "majority", None, None
    agg = spec.scoring.replica_aggregation
    return agg.strategy, agg.min_pass_rate, spec.scoring.pass_threshold


async def scenario_views(service: ExperimentService, row: Any, scenario_rows: list[Any], include_runs: bool = True) -> list[dict[str, Any]]:
    store = service.store
    strategy, min_rate, _ = await aggregation_of(service, row)
    ids = [s["id"] for s in scenario_rows]
    jobs_by_scenario: dict[str, list[Any]] = {i: [] for i in ids}
    if ids:
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            for job in await job_store.of_scenarios(store, list(chunk)):
                jobs_by_scenario[job["scenario_id"]].append(job)
    traces = await trace_ids_by_run(store, row["tenant_id"], row["id"])
    costs = await trace_costs(store, row["tenant_id"], row["id"])
    inputs = loads(row["inputs"], None)
    dataset = await dataset_store.experiment_dataset(store, row["id"])
    return [
        scenario_view(s, jobs_by_scenario[s["id"]], spec_id=row["spec_id"], spec_version=row["spec_version"], inputs=inputs,
                      strategy=strategy, min_pass_rate=min_rate, experiment_status=row["status"], trace_ids=traces,
                      trace_costs=costs, include_runs=include_runs, dataset=dataset)
        for s in scenario_rows
    ]


async def run_results(service: ExperimentService, row: Any) -> dict[str, Any]:
    """RunResults: the experiment, every scenario with its replicas, and the metrics block."""
    store = service.store
    scenario_rows = await experiment_store.scenarios(store, row["id"])
    scenarios = await scenario_views(service, row, scenario_rows)
    jobs = await job_store.of_group(store, row["id"])
    costs = await trace_costs(store, row["tenant_id"], row["id"])
    base = run_metrics(jobs, costs)
    # Always fresh (trace events may arrive after the last run finished); the copy cached on the
    # row at completion serves lists and history.
    summary = await summary_for(store, row["tenant_id"], row["id"], jobs, costs)
    strategy, min_rate, threshold = await aggregation_of(service, row)
    completed = base["runs"]
    record = experiment_record(row, completed)
    record.pop("summary", None)
    verdicts = verdict_counts(scenarios)
    pass_at, pass_hat = overall_pass_k(scenarios)
    return {
        "experiment_id": row["id"],
        **record,
        "dataset": await dataset_store.experiment_dataset(store, row["id"]),
        "aggregation": {"strategy": strategy, "min_pass_rate": min_rate, "pass_threshold": threshold},
        "scenarios": scenarios,
        "metrics": {
            **summary,
            "verdicts": verdicts,
            "scenarios": len(scenarios),
            "scenarios_passed": sum(1 for s in scenarios if s["passed"]),
            "all_passed": bool(scenarios) and all(s["verdict"] == "pass" for s in scenarios),
            "pass_at_k": pass_at, "pass_hat_k": pass_hat,
            "retried_runs": sum(s["retried_runs"] for s in scenarios),
        },
    }
