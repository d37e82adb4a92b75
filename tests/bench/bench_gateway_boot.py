"""What the model gateway adds to a sandbox's boot. A script, not a test:

    .venv/bin/python -m tests.bench.bench_gateway_boot [-n 10]

Interleaved in one run, through the API of an in-process daemon (`POST /v1/sandboxes` with a spec,
answered once the sandbox is ready): a bare sandbox and the same sandbox with a `models:` block,
cold (SERVICE_POOL_SIZE=0) and from the warm pool (each measured create starts from a full pool).
Prints p50/p95 per row and the gateway's cost (with minus without). Upstreams are never called.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import yaml

from tests.support.api import start_api, stop_api
from tests.support.images import PYTHON
from tests.support.waiting import wait_for


def doc(spec_id: str, gateway: bool) -> dict:
    spec = {"version": 1, "id": spec_id, "base": PYTHON, "task": {"prompt": "bench"},
            "agent": {"type": "cli", "binary": "sh"},
            "invariants": {"x": {"check": {"type": "file_exists", "path": "x"}}}}
    if gateway:
        spec["secrets"] = {"OPENAI_KEY": "env"}
        spec["models"] = {"providers": {"openai": {"key": "OPENAI_KEY", "base_url": "http://127.0.0.1:9/v1"}}}
    return spec


async def create(api, spec: dict) -> tuple[float, str]:
    started = time.perf_counter()
    response, body = await api.post("/v1/sandboxes", json={"spec_id": spec["id"], "secrets": {"OPENAI_KEY": "sk-bench"}})
    took = time.perf_counter() - started
    assert response.status == 201 and body["state"] == "ready", body
    return took * 1000, body["id"]


async def pool_full(api, count: int) -> None:
    async def full():
        response, body = await api.get("/v1/health")
        return sum(body["sandbox_pool"]["pooled"].values()) >= count or None

    await wait_for(full, timeout=180, what="a full pool", interval=0.1)


async def measure(n: int, pooled: bool) -> dict[str, list[float]]:
    api = await start_api(pool_size=1 if pooled else 0)
    out: dict[str, list[float]] = {"bare": [], "gateway": []}
    try:
        specs = {"bare": doc("bench-bare", False), "gateway": doc("bench-gateway", True)}
        for spec in specs.values():
            await api.upload_yaml(yaml.safe_dump(spec), name=spec["id"])
        if pooled:  # the first create of each shape misses and starts its pool
            for spec in specs.values():
                _, sid = await create(api, spec)
                await api.delete(f"/v1/sandboxes/{sid}")
        for _ in range(n):
            for name, spec in specs.items():
                if pooled:
                    await pool_full(api, 2)
                ms, sid = await create(api, spec)
                out[name].append(ms)
                await api.delete(f"/v1/sandboxes/{sid}")
    finally:
        await stop_api(api)
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round((len(ordered) - 1) * p)))]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("SERVICE_EGRESS_ALLOW_PRIVATE", "1")
    print(f"model gateway boot cost, {args.n} creates per row, load {os.getloadavg()[0]:.1f}")
    for label, pooled in (("cold", False), ("pooled", True)):
        rows = await measure(args.n, pooled)
        bare, gw = statistics.median(rows["bare"]), statistics.median(rows["gateway"])
        for name, values in rows.items():
            print(f"  {label:6} {name:8} p50 {statistics.median(values):8.1f} ms   p95 {pct(values, 0.95):8.1f} ms")
        print(f"  {label:6} gateway adds {gw - bare:+.1f} ms at p50 (x{gw / bare:.2f})")


if __name__ == "__main__":
    asyncio.run(main())
