"""Experiments over a dataset (`parallelism.dataset: {id, version?, tags?}`): at creation every record
of that version becomes a scenario (crossed with the matrix entries; its `matrix_entry` names
`record_id`), and at run time a scenario's record gives the run its inputs and `expected`."""
from __future__ import annotations

from typing import Any

from daemon.errors import Forbidden, InvalidRequest, NotFound
from daemon.store import datasets as store_ds
from daemon.store.db import Store, loads

LOC = "parallelism.dataset"


async def expand(store: Store, tenant_id: str, ref: Any, entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(matrix entries x records, {id, version, digest, tags}) for the spec's dataset reference."""
    row = await store_ds.get(store, ref.id)
    if row is None:
        raise NotFound("dataset", ref.id, f"{LOC}.id: dataset '{ref.id}' not found")
    if row["tenant_id"] != tenant_id:
        raise Forbidden(f"{LOC}.id: dataset '{ref.id}' belongs to another tenant")
    version = ref.version or row["version"]
    if version > row["version"]:
        raise InvalidRequest(f"{LOC}.version: dataset '{ref.id}' has versions 1 to {row['version']}, not {version}",
                             [{"loc": f"{LOC}.version", "msg": f"at most {row['version']}"}])
    for i, entry in enumerate(entries):
        if "record_id" in entry:
            raise InvalidRequest(f"matrix.{i}.record_id: the name is reserved for the dataset record of each scenario",
                                 [{"loc": f"matrix.{i}.record_id", "msg": "reserved with parallelism.dataset"}])
    record_ids = await store_ds.record_ids(store, ref.id, version, list(ref.tags) if ref.tags else None)
    if not record_ids:
        which = f" with any of the tags {', '.join(ref.tags)}" if ref.tags else ""
        raise InvalidRequest(f"{LOC}: dataset '{ref.id}' version {version} has no records{which}: nothing to run",
                             [{"loc": LOC, "msg": "no records"}])
    digest = (await store_ds.version(store, ref.id, version))["digest"]
    crossed = [{**entry, "record_id": record_id} for record_id in record_ids for entry in entries]
    return crossed, {"id": ref.id, "version": version, "digest": digest, "tags": list(ref.tags) if ref.tags else None}


async def scenario_record(store: Store, experiment_id: str, matrix_entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """The record of a dataset scenario, as {id, dataset_id, version, input, expected}; None when the
    experiment has no dataset. Raises LookupError when the record is gone (the dataset was deleted)."""
    record_id = (matrix_entry or {}).get("record_id")
    dataset = await store_ds.experiment_dataset(store, experiment_id) if record_id else None
    if dataset is None:
        return None
    row = await store_ds.record(store, record_id)
    if row is None:
        raise LookupError(f"dataset record '{record_id}' no longer exists (its dataset was deleted)")
    return {"id": row["id"], "dataset_id": row["dataset_id"], "version": dataset["version"],
            "input": loads(row["input"]), "expected": loads(row["expected"])}


def replay_record_id(matrix_entry: dict[str, Any] | None) -> str | None:
    """The record a standalone run replays: a reproducer's `matrix_entry.record_id`."""
    value = (matrix_entry or {}).get("record_id")
    return value if isinstance(value, str) and value.startswith("rec_") else None


async def replay_record(store: Store, tenant_id: str, matrix_entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """The record a standalone run (a reproducer, a replay) names, as scenario_record gives it, so the
    run gets the same inputs and `expected` the failing scenario had. A record row never changes once
    stored, so its id alone gives its content at every version holding it; `version` is the one that
    added it. None without a record id; LookupError when the tenant has no such record."""
    record_id = replay_record_id(matrix_entry)
    if record_id is None:
        return None
    row = await store_ds.record(store, record_id)
    if row is None or row["tenant_id"] != tenant_id:
        raise LookupError(f"matrix_entry.record_id: dataset record '{record_id}' not found (its dataset may have been deleted)")
    return {"id": row["id"], "dataset_id": row["dataset_id"], "version": row["added_version"],
            "input": loads(row["input"]), "expected": loads(row["expected"])}


def runner_record(record: dict[str, Any]) -> dict[str, Any]:
    """What the runner keeps of a record: `expected` for the checks, the rest for the reproducer."""
    return {"id": record["id"], "dataset_id": record["dataset_id"], "version": record["version"], "expected": record["expected"]}


def record_inputs(record: dict[str, Any]) -> dict[str, Any]:
    """What a record's `input` fills: its keys when it is an object, else `{{ input }}`."""
    value = record["input"]
    return dict(value) if isinstance(value, dict) else {"input": value}
