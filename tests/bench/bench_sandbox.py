"""Sandbox boot and teardown timings against the real engine. A script, not a test:

    .venv/bin/python -m tests.bench.bench_sandbox [-n 20]

For (a) a bare sandbox and (b) a sandbox with postgres it measures create-to-ready through the API
(an in-process daemon app, `POST /v1/sandboxes` with a spec, which answers once the sandbox is
ready), interleaved in the same run with plain `docker run --rm IMAGE true` of the same image, and
prints p50/p95 and the ratio. For (b) it also times the fairer baseline "docker run -d postgres,
poll pg_isready, docker rm -f". Teardown is `DELETE /v1/sandboxes/{id}` until everything is gone.

Cold rows come from a daemon with SERVICE_POOL_SIZE=0; pooled rows from one with the product's pool
(2 per shape): after the shape's first (missed) create, each measured create starts from a full
pool (the refill of the previous claim has finished) and must be served from it.
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from tests.support.images import POSTGRES, PYTHON


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def docker_run_true(image: str) -> float:
    started = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
    return time.perf_counter() - started


def docker_postgres_ready() -> float:
    started = time.perf_counter()
    cid = subprocess.run(["docker", "run", "-d", "-e", "POSTGRES_PASSWORD=bench", POSTGRES],
                         check=True, capture_output=True, text=True).stdout.strip()
    try:
        while subprocess.run(["docker", "exec", cid, "pg_isready", "-q", "-h", "127.0.0.1"]).returncode != 0:
            time.sleep(0.05)
        return time.perf_counter() - started
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)


def spec_doc(spec_id: str, services: list[dict]) -> str:
    return yaml.safe_dump({
        "version": 1, "id": spec_id, "base": PYTHON, "task": {"prompt": "bench"}, "services": services,
        "invariants": {"ok": {"check": {"type": "file_exists", "path": "x"}}},
    })


class Daemon:
    """An in-process daemon app with its own home; `pool_size` 0 boots every sandbox cold."""

    def __init__(self, pool_size: int):
        self.pool_size = pool_size

    async def __aenter__(self) -> "Daemon":
        from aiohttp.test_utils import TestClient, TestServer

        from client.config import read_env_file
        from daemon.app import create_app
        from daemon.config import Settings

        self.home = Path(tempfile.mkdtemp(prefix="svc-bench-", dir="/tmp"))
        settings = Settings(home=self.home, socket_path=self.home / "svcd.sock", port=0, pool_size=self.pool_size)
        self.client = TestClient(TestServer(create_app(settings)))
        await self.client.start_server()
        self.headers = {"Authorization": "Bearer " + read_env_file(settings.credentials_path)["SERVICE_API_KEY"]}
        for spec_id, services in (("bench-bare", []), ("bench-pg", [{"name": "db", "type": "postgres"}])):
            response = await self.client.post("/v1/specs", json={"name": spec_id, "yaml": spec_doc(spec_id, services)},
                                              headers=self.headers)
            assert response.status == 201, await response.text()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.close()
        shutil.rmtree(self.home, ignore_errors=True)

    async def sandbox(self, spec_id: str) -> tuple[float, float, bool]:
        """(create-to-ready s, teardown s, served from the pool)."""
        started = time.perf_counter()
        response = await self.client.post("/v1/sandboxes", json={"spec_id": spec_id}, headers=self.headers)
        body = await response.json()
        ready = time.perf_counter() - started
        assert response.status == 201 and body["state"] == "ready", body
        started = time.perf_counter()
        response = await self.client.delete(f"/v1/sandboxes/{body['id']}", headers=self.headers)
        assert response.status == 204
        return ready, time.perf_counter() - started, body["boot"]["pooled"]

    async def pool_full(self, timeout: float = 180) -> None:
        """Wait until the pool holds `pool_size` sandboxes of the last shape asked for (the refill
        after a claim runs in the background; measured hits start from a full pool)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            response = await self.client.get("/v1/health")
            pooled = (await response.json())["sandbox_pool"]["pooled"]
            if pooled and max(pooled.values()) >= self.pool_size:
                return
            await asyncio.sleep(0.1)
        raise SystemExit("the pool did not fill within 180 s")


async def main(n: int) -> None:
    from daemon.sandbox.images import ensure_stock_images

    ensure_stock_images(log=lambda m: print(m))
    cases = (("bare", "bench-bare", PYTHON), ("postgres", "bench-pg", POSTGRES))
    results: dict[str, dict[str, list[float]]] = {
        label: {"sandbox": [], "teardown": [], "pooled": [], "docker": [], "docker_ready": []} for label, _, _ in cases}
    async with Daemon(pool_size=0) as cold:
        # Warm-up (image layers in the page cache, connection pools, first-time migrations).
        await cold.sandbox("bench-bare")
        await asyncio.to_thread(docker_run_true, PYTHON)
        for label, spec_id, image in cases:
            row = results[label]
            for _ in range(n):
                ready, teardown, _pooled = await cold.sandbox(spec_id)
                row["sandbox"].append(ready)
                row["teardown"].append(teardown)
                row["docker"].append(await asyncio.to_thread(docker_run_true, image))
                if label == "postgres":
                    row["docker_ready"].append(await asyncio.to_thread(docker_postgres_ready))
    async with Daemon(pool_size=2) as warm:
        for label, spec_id, image in cases:
            row = results[label]
            await warm.sandbox(spec_id)  # the miss that makes the shape pooled
            for _ in range(n):
                await warm.pool_full()
                ready, _teardown, pooled = await warm.sandbox(spec_id)
                assert pooled, "a create after the pool filled was not served from it"
                row["pooled"].append(ready)
                row["docker"].append(await asyncio.to_thread(docker_run_true, image))
                if label == "postgres":
                    row["docker_ready"].append(await asyncio.to_thread(docker_postgres_ready))

    def ms(v: float) -> str:
        return f"{v * 1000:7.0f} ms"

    def ratio(name: str, a: list[float], b: list[float]) -> None:
        print(f"{'  ratio ' + name:34} {pct(a, .5) / pct(b, .5):9.3f}x {pct(a, .95) / pct(b, .95):9.3f}x")

    print(f"\nsandbox create-to-ready vs plain `docker run --rm IMAGE true` (n={n}, interleaved)\n")
    print(f"{'':34} {'p50':>10} {'p95':>10}")
    for label, row in results.items():
        image = PYTHON if label == "bare" else POSTGRES
        print(f"{label + ' sandbox cold (API, ready)':34} {ms(pct(row['sandbox'], .5))} {ms(pct(row['sandbox'], .95))}")
        print(f"{label + ' sandbox pooled (API, ready)':34} {ms(pct(row['pooled'], .5))} {ms(pct(row['pooled'], .95))}")
        print(f"{'docker run --rm ' + image.split('/')[-1] + ' true':34} {ms(pct(row['docker'], .5))} {ms(pct(row['docker'], .95))}")
        ratio("cold / docker run", row["sandbox"], row["docker"])
        ratio("pooled / docker run", row["pooled"], row["docker"])
        ratio("pooled / cold", row["pooled"], row["sandbox"])
        if row["docker_ready"]:
            print(f"{'docker run -d postgres + pg_isready':34} {ms(pct(row['docker_ready'], .5))} {ms(pct(row['docker_ready'], .95))}")
            ratio("cold / docker pg", row["sandbox"], row["docker_ready"])
            ratio("pooled / docker pg", row["pooled"], row["docker_ready"])
        print(f"{label + ' teardown (DELETE)':34} {ms(pct(row['teardown'], .5))} {ms(pct(row['teardown'], .95))}")
        print(f"{'  mean / stdev cold':34} {ms(statistics.mean(row['sandbox']))} {ms(statistics.pstdev(row['sandbox']))}")
        print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="iterations per case (default 20)")
    asyncio.run(main(parser.parse_args().n))
