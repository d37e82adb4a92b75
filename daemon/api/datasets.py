"""Datasets: create, list, get, delete; add records (one call = one version), read a version, diff two."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from daemon.app import owned_by_path
from daemon.contract.common import Page
from daemon.contract.datasets import (
    MAX_DATASETS,
    MAX_RECORD_BYTES,
    MAX_RECORDS,
    MAX_VERSIONS,
    RECORD_SIZE_RULE,
    Dataset,
    DatasetCreate,
    DatasetVersion,
    DiffQuery,
    Record,
    RecordQuery,
)
from daemon.datasets import service
from daemon.contract import routes as R
from daemon.http import STORE, Routes, decode_cursor, page_body, page_of, page_params, read_json
from daemon.store import datasets as store_ds

routes = Routes("datasets")


async def owned_dataset(request: web.Request) -> Any:
    return await owned_by_path(request, "dataset_id", store_ds.get, "dataset")


@routes.post(R.CREATE_DATASET, "Create a dataset (version 1, no records)",
             errors=(409,), description=f"409 `conflict` with `details.limit` when the tenant already has {MAX_DATASETS} datasets.")
async def create_dataset(request: web.Request) -> dict[str, Any]:
    body: DatasetCreate = request["body"]
    return await service.create(request.app[STORE], request["tenant_id"], body.name, body.description)


@routes.get(R.LIST_DATASETS, "List datasets, newest first")
async def list_datasets(request: web.Request) -> Page[Dataset]:
    return page_of(await store_ds.page(request.app[STORE], request["tenant_id"], *page_params(request)), service.dataset_body)


@routes.get(R.GET_DATASET, "One dataset at its latest version")
async def get_dataset(request: web.Request) -> dict[str, Any]:
    return service.dataset_body(await owned_dataset(request))


@routes.get(R.LIST_DATASET_VERSIONS, "Versions of a dataset, newest first: record count, digest")
async def list_versions(request: web.Request) -> Page[DatasetVersion]:
    row = await owned_dataset(request)
    return page_of(await store_ds.version_page(request.app[STORE], row["id"], *page_params(request)), store_ds.version_body)


@routes.delete(R.DELETE_DATASET, "Delete a dataset with every version and record")
async def delete_dataset(request: web.Request) -> web.Response:
    row = await owned_dataset(request)
    await store_ds.delete(request.app[STORE], row["id"])
    return web.Response(status=204)


@routes.post(R.ADD_DATASET_RECORDS, "Add records: one call is one new version, all or nothing", errors=(409,), description=(
                 "The body is a JSON array of records (`input` required). Every record is stamped with the new version; a "
                 "record with a `key` replaces the current record with that key in the new version (upsert). The call is "
                 "refused whole, adding nothing: 400 naming `records.<index>.<field>` for a missing `input`, a wrong type or "
                 f"an unknown field; 413 when a record is over {MAX_RECORD_BYTES} bytes ({RECORD_SIZE_RULE}); 409 "
                 f"(`details.limit`) when the new version would hold more than {MAX_RECORDS} records or the dataset would "
                 f"pass {MAX_VERSIONS} versions."))
async def add_records(request: web.Request) -> dict[str, Any]:
    row = await owned_dataset(request)
    return await service.add_records(request.app[STORE], row, await read_json(request))


@routes.get(R.LIST_DATASET_RECORDS, "Records of one version (default latest) in insertion order; "
            "tags=a,b matches any of them")
async def list_records(request: web.Request) -> Page[Record]:
    row = await owned_dataset(request)
    query: RecordQuery = request["query"]
    number = service.check_version(row, query.version)
    tags = [t.strip() for t in (query.tags or "").split(",") if t.strip()] or None
    after = decode_cursor(query.cursor) if query.cursor else None
    rows = await store_ds.records_page(request.app[STORE], row["id"], number, tags, after, query.limit)
    kept = rows[:query.limit]
    return page_body([store_ds.record_body(r) for r in kept], kept[-1]["seq"] if kept else None, query.limit, len(rows))


@routes.get(R.DIFF_DATASET_VERSIONS, "What changed between two versions: added, removed, modified (same key)")
async def diff_versions(request: web.Request) -> dict[str, Any]:
    row = await owned_dataset(request)
    query: DiffQuery = request["query"]
    start = service.check_version(row, query.from_, "query.from")
    end = service.check_version(row, query.to, "query.to")
    return await service.diff(request.app[STORE], row, start, end, query.limit)
