"""Benchmark: reading versions of a 10,000-record dataset and diffing two versions, on the real store
(SQLite file, migrations) and through the real HTTP stack (in-process app on a socket).

The dataset: 10,000 records (about 200 bytes each) in version 2, then 50 versions that each upsert 100
keyed records (15,000 stored rows). Prints p50/p95 of:
- the range query of a random version (all 10,000 record ids; what an experiment's expansion runs),
- reading a whole version from the store (10,000 records, each decoded as the API shows it),
- the last page of 1,000 of a version from the store (after the id query that finds its cursor): a page
  walks the records in insertion order and stops at its LIMIT (migration 015), it does not sort the
  whole version,
- `GET /v1/datasets/{id}/records?version=N&limit=1000` (one page through HTTP, validated answer),
- every page of a version through HTTP (10 calls),
- a diff of version 2 and the latest (about 4,000 upserted keys),
each against a reference measured in the same run: a plain `SELECT id FROM dataset_records` of all
15,000 stored rows. Targets: a version read p95 < 50 ms, a diff < 100 ms. Asserts nothing.

    .venv/bin/python -m tests.bench.bench_datasets [--samples 40]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from daemon.app import create_app
from daemon.datasets import service
from daemon.store import datasets as store_ds
from tests.support.api import default_key, make_settings
from daemon.appkeys import DEFAULT_TENANT_ID, STORE

RECORDS = 10_000
UPSERT_VERSIONS = 50
UPSERTS_PER_VERSION = 100


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def record(i: int, revision: int = 0) -> dict:
    return {"key": f"k{i:05d}", "input": {"question": f"what is {i} plus {revision}?", "context": "x" * 120},
            "expected": {"answer": str(i + revision)}, "tags": ["even" if i % 2 == 0 else "odd"]}


async def timed(samples: int, call) -> list[float]:
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def line(name: str, times: list[float], reference: list[float]) -> str:
    ref = statistics.median(reference)
    return (f"{name:<44} p50 {statistics.median(times):7.1f} ms  p95 {percentile(times, 95):7.1f} ms"
            f"  ({statistics.median(times) / ref:4.2f}x the plain SELECT)")


async def main(samples: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="svc-bench-ds-", dir="/tmp"))
    settings = make_settings(home, rate_limit_per_s=100000.0, rate_limit_burst=100000)
    app = create_app(settings)
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        store = app[STORE]
        tenant = app[DEFAULT_TENANT_ID]
        dataset = await service.create(store, tenant, "bench", None)
        row = await store_ds.get(store, dataset["id"])
        started = time.perf_counter()
        await service.add_records(store, row, [record(i) for i in range(RECORDS)])
        for v in range(UPSERT_VERSIONS):
            picks = random.Random(v).sample(range(RECORDS), UPSERTS_PER_VERSION)
            await service.add_records(store, row, [record(i, v + 1) for i in picks])
        print(f"load average {os.getloadavg()[0]:.2f} (2 cores shared)")
        print(f"setup: {RECORDS} records + {UPSERT_VERSIONS} versions of {UPSERTS_PER_VERSION} upserts in "
              f"{time.perf_counter() - started:.1f} s")
        latest = 2 + UPSERT_VERSIONS
        rng = random.Random(1)

        async def plain_select():
            rows = await store.fetchall("SELECT id FROM dataset_records")
            assert len(rows) == RECORDS + UPSERT_VERSIONS * UPSERTS_PER_VERSION

        async def range_query():
            assert len(await store_ds.record_ids(store, dataset["id"], rng.randint(2, latest))) == RECORDS

        async def read_version():
            rows = await store_ds.records_page(store, dataset["id"], rng.randint(2, latest), None, None, RECORDS)
            assert len([store_ds.record_body(r) for r in rows]) == RECORDS

        async def read_last_page():
            number = rng.randint(2, latest)
            ids = await store_ds.record_ids(store, dataset["id"], number)
            last = await store.fetchone("SELECT seq FROM dataset_records WHERE id = ?", (ids[-1001],))
            rows = await store_ds.records_page(store, dataset["id"], number, None, last["seq"], 1000)
            assert len(rows) == 1000

        headers = {"Authorization": f"Bearer {default_key(settings)}"}

        async def read_page(version: int | None = None, cursor: str | None = None) -> str | None:
            params = {"version": str(version or rng.randint(2, latest)), "limit": "1000", **({"cursor": cursor} if cursor else {})}
            response = await client.get(f"/v1/datasets/{dataset['id']}/records", params=params, headers=headers)
            assert response.status == 200
            page = await response.json()
            assert len(page["items"]) == 1000
            return page["next_cursor"]

        async def read_version_pages():
            version, cursor = rng.randint(2, latest), None
            for _ in range(RECORDS // 1000):
                cursor = await read_page(version, cursor)

        async def diff():
            result = await service.diff(store, row, 2, latest, 100)
            assert result["counts"]["modified"] > 0

        reference = await timed(samples, plain_select)
        print(f"{'reference: SELECT id of all 15,000 rows':<44} p50 {statistics.median(reference):7.1f} ms  "
              f"p95 {percentile(reference, 95):7.1f} ms")
        print(line("range query of a version (10,000 records)", await timed(samples, range_query), reference) + "  target p95 < 50 ms")
        print(line("read a version (10,000 records decoded)", await timed(samples, read_version), reference) + "  target p95 < 50 ms")
        print(line("last page of 1,000 (store; + the id query)", await timed(samples, read_last_page), reference))
        print(line("GET records?version=N&limit=1000 (HTTP)", await timed(samples, read_page), reference))
        print(line("every page of a version (10 x 1000, HTTP)", await timed(max(5, samples // 4), read_version_pages), reference))
        print(line(f"diff version 2 -> {latest}", await timed(samples, diff), reference) + "  target < 100 ms")
    finally:
        await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=40)
    asyncio.run(main(parser.parse_args().samples))
