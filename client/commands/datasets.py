"""`svc datasets list|create|get|delete|versions|add|records|diff|import|export|from-failures`: versioned records."""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from client.api import ApiError, Client
from client.commands.common import action_group, add_id_actions, add_list, delete_and_say, json_lines, print_answer
from client.routes import R

RECORD_KEYS = ("input", "expected", "metadata", "tags", "key")
FAILING = ("fail", "flaky", "error")


def register(sub: argparse._SubParsersAction) -> None:
    actions = action_group(sub, "datasets", "datasets: versioned records that experiments run over")
    add_list(actions, list_datasets, "datasets, newest first")

    create = actions.add_parser("create", help="a new dataset (version 1, no records)")
    create.add_argument("name")
    create.add_argument("--description")
    create.set_defaults(func=create_dataset)

    add_id_actions(actions, "dataset_id", ("get", get_dataset, "one dataset at its latest version"),
                   ("delete", delete_dataset, "delete a dataset with every version and record"))

    versions = actions.add_parser("versions", help="a dataset's versions, newest first, with their record counts and digests")
    versions.add_argument("dataset_id")
    versions.set_defaults(func=list_versions)

    add = actions.add_parser("add", help="add records (a .jsonl file, a JSON array file, or - for JSONL on stdin) as one new version")
    add.add_argument("dataset_id")
    add.add_argument("file")
    add.set_defaults(func=add_records)

    records = actions.add_parser("records", help="every record of a version (default latest) as a JSON array")
    records.add_argument("dataset_id")
    records.add_argument("--version", type=int)
    records.add_argument("--tags", help="comma-separated; records with any of them")
    records.set_defaults(func=list_records)

    diff = actions.add_parser("diff", help="added, removed and modified records between two versions")
    diff.add_argument("dataset_id")
    diff.add_argument("--from", dest="start", type=int, required=True)
    diff.add_argument("--to", dest="end", type=int, help="default: the latest")
    diff.add_argument("--limit", type=int, default=100, help="records listed per kind of change")
    diff.set_defaults(func=diff_versions)

    imp = actions.add_parser("import", help="create a dataset NAME from a .jsonl file (one record per line) in one version")
    imp.add_argument("name")
    imp.add_argument("file")
    imp.add_argument("--description")
    imp.set_defaults(func=import_dataset)

    exp = actions.add_parser("export", help="a version's records as JSONL on stdout (importable again)")
    exp.add_argument("dataset_id")
    exp.add_argument("--version", type=int)
    exp.add_argument("--tags")
    exp.set_defaults(func=export_dataset)

    failures = actions.add_parser("from-failures", help="turn an experiment's failing scenarios (fail, flaky, error) into records")
    failures.add_argument("experiment_id")
    target = failures.add_mutually_exclusive_group()
    target.add_argument("--dataset", help="add to this dataset (default: a new one)")
    target.add_argument("--name", help="name of the new dataset (default: failures-<experiment name>)")
    failures.set_defaults(func=from_failures)


# --- reading records ---------------------------------------------------------------------------------


def read_records(path: str) -> tuple[list[Any], list[int]]:
    """The records of a .jsonl file (blank lines skipped) or of a file holding one JSON array, with
    the line each came from."""
    from client.console import CliError

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: cannot read: {exc}")
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except ValueError as exc:
            raise CliError(f"{path}: not a JSON array: {exc}")
        return records, [0] * len(records)
    records, lines = json_lines(path, text)
    if not records:
        raise CliError(f"{path}: no records")
    return records, lines


async def post_records(client: Client, dataset_id: str, records: list[Any], lines: list[int]) -> dict[str, Any]:
    """POST the records; the daemon's `records.<index>` errors point at the file's line."""
    try:
        return await client.call(R.ADD_DATASET_RECORDS, body=records, dataset_id=dataset_id)
    except ApiError as exc:
        for issue in (exc.details or {}).get("errors", []) if isinstance(exc.details, dict) else []:
            match = re.match(r"^records\.(\d+)", str(issue.get("loc", "")))
            if match and int(match.group(1)) < len(lines) and lines[int(match.group(1))]:
                issue["line"] = lines[int(match.group(1))]
        # the message names the first refused record: say its line there too (a lone issue is not printed)
        match = re.match(r"^records\.(\d+)", str(exc.body.get("message", ""))) if isinstance(exc.body, dict) else None
        if match and int(match.group(1)) < len(lines) and lines[int(match.group(1))]:
            exc.body["message"] = f"line {lines[int(match.group(1))]} {exc.body['message']}"
        raise


async def all_records(client: Client, dataset_id: str, version: int | None, tags: str | None) -> list[dict[str, Any]]:
    params = {"version": version, "tags": tags}
    return [item async for item in client.pages(R.LIST_DATASET_RECORDS, query=params, page_size=1000, dataset_id=dataset_id)]


def portable(record: dict[str, Any]) -> dict[str, Any]:
    """A stored record as it can be added again (no id, version or digest)."""
    return {k: record[k] for k in RECORD_KEYS if record.get(k) not in (None, [])}


# --- commands ------------------------------------------------------------------------------------------


async def list_datasets(args, client: Client) -> int:
    return await print_answer(client.call(R.LIST_DATASETS, query={"limit": args.limit}))


async def create_dataset(args, client: Client) -> int:
    from client.console import emit, say

    body = {"name": args.name, **({"description": args.description} if args.description else {})}
    dataset = await client.call(R.CREATE_DATASET, body=body)
    say(f"created dataset {dataset['id']} ({dataset['name']})")
    emit(dataset)
    return 0


async def get_dataset(args, client: Client) -> int:
    return await print_answer(client.call(R.GET_DATASET, dataset_id=args.dataset_id))


async def list_versions(args, client: Client) -> int:
    from client.console import emit

    emit([item async for item in client.pages(R.LIST_DATASET_VERSIONS, query={}, page_size=100, dataset_id=args.dataset_id)])
    return 0


async def delete_dataset(args, client: Client) -> int:
    return await delete_and_say(client, R.DELETE_DATASET, f"deleted dataset {args.dataset_id}", dataset_id=args.dataset_id)


async def add_records(args, client: Client) -> int:
    from client.console import emit, say

    records, lines = read_records(args.file)
    result = await post_records(client, args.dataset_id, records, lines)
    say(f"added {result['added']} records ({result['replaced']} replaced): {args.dataset_id} is now version {result['version']}")
    emit(result)
    return 0


async def list_records(args, client: Client) -> int:
    return await print_answer(all_records(client, args.dataset_id, args.version, args.tags))


async def diff_versions(args, client: Client) -> int:
    params = {"from": args.start, "to": args.end, "limit": args.limit}
    return await print_answer(client.call(R.DIFF_DATASET_VERSIONS, query=params, dataset_id=args.dataset_id))


async def import_dataset(args, client: Client) -> int:
    from client.console import emit, say

    records, lines = read_records(args.file)
    body = {"name": args.name, **({"description": args.description} if args.description else {})}
    dataset = await client.call(R.CREATE_DATASET, body=body)
    try:
        result = await post_records(client, dataset["id"], records, lines)
    except ApiError:
        await client.call(R.DELETE_DATASET, dataset_id=dataset["id"])  # nothing half-imported is left behind
        raise
    say(f"imported {result['added']} records into {dataset['id']} ({args.name}) version {result['version']}")
    emit({"dataset": await client.call(R.GET_DATASET, dataset_id=dataset["id"]), **result})
    return 0


async def export_dataset(args, client: Client) -> int:
    for record in await all_records(client, args.dataset_id, args.version, args.tags):
        sys.stdout.write(json.dumps(portable(record), separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0


async def from_failures(args, client: Client) -> int:
    from client.console import CliError, emit, say

    results = await client.call(R.GET_EXPERIMENT, experiment_id=args.experiment_id)
    failing = [s for s in results["scenarios"] if s.get("verdict") in FAILING]
    if not failing:
        raise CliError(f"experiment {args.experiment_id} has no failing scenarios (verdict fail, flaky or error)")
    source = results.get("dataset")
    originals: dict[str, dict[str, Any]] = {}
    if source:
        originals = {r["id"]: r for r in await all_records(client, source["id"], source["version"], None)}
    records = [failure_record(results, scenario, originals) for scenario in failing]
    dataset_id = args.dataset
    if dataset_id is None:
        name = args.name or f"failures-{results['name']}"[:200]
        dataset_id = (await client.call(R.CREATE_DATASET, body={"name": name, "description": f"failing scenarios of {args.experiment_id}"}))["id"]
    result = await post_records(client, dataset_id, records, [])
    say(f"{result['added']} failing scenarios of {args.experiment_id} are records of {dataset_id} version {result['version']}")
    emit({"dataset_id": dataset_id, **result})
    return 0


def failure_record(results: dict[str, Any], scenario: dict[str, Any], originals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A failing scenario as a record: its dataset record's input and expected when it ran over one,
    else the inputs and matrix entry it ran with; where it came from in `metadata`."""
    entry = dict(scenario.get("matrix_entry") or {})
    record_id = entry.pop("record_id", None)
    original = originals.get(record_id or "")
    metadata = {"experiment_id": results["id"], "scenario_id": scenario["id"], "verdict": scenario["verdict"],
                "errors": scenario.get("errors") or [], "run_ids": scenario.get("run_ids") or []}
    if original is not None:
        metadata["record_id"] = record_id
        record = {"input": original["input"], "metadata": metadata, "tags": ["from-failures"]}
        if original.get("expected") is not None:
            record["expected"] = original["expected"]
        return record
    inputs = dict(((scenario.get("reproducer") or {}).get("inputs")) or {})
    return {"input": {**inputs, **entry}, "metadata": metadata, "tags": ["from-failures"]}
