"""What an experiment's creation checks before anything is stored: its matrix entries, or the failing
entries of the experiment it re-runs (--filter-failing). The service (daemon.experiments.service)
creates, runs and cancels experiments and answers their RunResults."""
from __future__ import annotations

import re
from typing import Any

from daemon.contract.experiments import MATRIX_PARAM_PATTERN
from daemon.errors import Conflict, InvalidRequest
from daemon.store import experiments as experiment_store
from daemon.store.db import Store, loads

MAX_RUNS_PER_EXPERIMENT = 10_000
PARAM_NAME = re.compile(MATRIX_PARAM_PATTERN)
FAILING_VERDICTS = ("fail", "flaky", "error")
EXPERIMENT_STATUSES = ("created", "running", "completed", "failed", "cancelled")


def validate_matrix(matrix: list[dict[str, Any]], loc: str = "matrix") -> list[dict[str, Any]]:
    for i, entry in enumerate(matrix):
        if not entry:
            raise InvalidRequest(f"{loc}.{i}: a matrix entry must set at least one parameter", [{"loc": f"{loc}.{i}", "msg": "empty entry"}])
        for key in entry:
            if not PARAM_NAME.fullmatch(key):
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


async def recordings_source(store: Store, tenant_id: str, source_id: str, spec_id: str) -> Any:
    """The experiment whose model recordings `replay_models_from` names: the tenant's own (another
    tenant's is not found), of the same spec, finished."""
    from daemon.errors import NotFound

    source = await experiment_store.get(store, source_id)
    if source is None or source["tenant_id"] != tenant_id:
        raise NotFound("experiment", source_id)
    if source["spec_id"] != spec_id:
        raise InvalidRequest(f"replay_models_from: experiment '{source_id}' ran spec '{source['spec_id']}', not '{spec_id}'",
                             [{"loc": "replay_models_from", "msg": "different spec"}])
    if source["status"] in ("created", "running"):
        raise Conflict(f"experiment '{source_id}' is {source['status']}; wait until it finishes to replay its recordings",
                       source["status"])
    return source


def with_budget(spec: Any, budget: dict[str, Any] | None) -> Any:
    """The spec with an experiment's models.budget override (unchanged without one)."""
    if not budget or spec.models is None:
        return spec
    merged = spec.models.budget.model_copy(update=budget)
    return spec.model_copy(update={"models": spec.models.model_copy(update={"budget": merged})})
