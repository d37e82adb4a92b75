"""Sandbox boot and teardown timings against the real engine. A script, not a test:

    .venv/bin/python -m tests.bench.bench_sandbox [-n 20]

For (a) a bare sandbox and (b) a sandbox with postgres it measures create-to-ready through the API
(an in-process daemon app, `POST /v1/sandboxes` with a spec, which answers once the sandbox is
ready), interleaved in the same run with plain `docker run --rm IMAGE true` of the same image, and
prints p50/p95 and the ratio. For (b) it also times the fairer baseline "docker run -d postgres,
poll pg_isready, docker rm -f". Teardown is `DELETE /v1/sandboxes/{id}` until everything is gone.
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


async def main(n: int) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from client.config import read_env_file
    from daemon.app import create_app
    from daemon.config import Settings
    from daemon.sandbox.images import ensure_stock_images

    ensure_stock_images(log=lambda m: print(m))
    home = Path(tempfile.mkdtemp(prefix="svc-bench-", dir="/tmp"))
    settings = Settings(home=home, socket_path=home / "svcd.sock", port=0)
    client = TestClient(TestServer(create_app(settings)))
    await client.start_server()
    headers = {"Authorization": "Bearer " + read_env_file(settings.credentials_path)["SERVICE_API_KEY"]}
    try:
        for spec_id, services in (("bench-bare", []), ("bench-pg", [{"name": "db", "type": "postgres"}])):
            response = await client.post("/v1/specs", json={"name": spec_id, "yaml": spec_doc(spec_id, services)}, headers=headers)
            assert response.status == 201, await response.text()

        async def sandbox(spec_id: str) -> tuple[float, float]:
            started = time.perf_counter()
            response = await client.post("/v1/sandboxes", json={"spec_id": spec_id}, headers=headers)
            body = await response.json()
            ready = time.perf_counter() - started
            assert response.status == 201 and body["state"] == "ready", body
            started = time.perf_counter()
            response = await client.delete(f"/v1/sandboxes/{body['id']}", headers=headers)
            assert response.status == 204
            return ready, time.perf_counter() - started

        # Warm-up (image layers in the page cache, connection pools, first-time migrations).
        await sandbox("bench-bare")
        await asyncio.to_thread(docker_run_true, PYTHON)

        results: dict[str, dict[str, list[float]]] = {}
        for label, spec_id, image in (("bare", "bench-bare", PYTHON), ("postgres", "bench-pg", POSTGRES)):
            row = results.setdefault(label, {"sandbox": [], "teardown": [], "docker": [], "docker_ready": []})
            for _ in range(n):
                ready, teardown = await sandbox(spec_id)
                row["sandbox"].append(ready)
                row["teardown"].append(teardown)
                row["docker"].append(await asyncio.to_thread(docker_run_true, image))
                if label == "postgres":
                    row["docker_ready"].append(await asyncio.to_thread(docker_postgres_ready))
    finally:
        await client.close()
        shutil.rmtree(home, ignore_errors=True)

    def ms(v: float) -> str:
        return f"{v * 1000:7.0f} ms"

    print(f"\nsandbox create-to-ready vs plain `docker run --rm IMAGE true` (n={n}, interleaved)\n")
    print(f"{'':34} {'p50':>10} {'p95':>10}")
    for label, row in results.items():
        image = PYTHON if label == "bare" else POSTGRES
        print(f"{label + ' sandbox (API, ready)':34} {ms(pct(row['sandbox'], .5))} {ms(pct(row['sandbox'], .95))}")
        print(f"{'docker run --rm ' + image.split('/')[-1] + ' true':34} {ms(pct(row['docker'], .5))} {ms(pct(row['docker'], .95))}")
        print(f"{'  ratio':34} {pct(row['sandbox'], .5) / pct(row['docker'], .5):9.2f}x {pct(row['sandbox'], .95) / pct(row['docker'], .95):9.2f}x")
        if row["docker_ready"]:
            print(f"{'docker run -d postgres + pg_isready':34} {ms(pct(row['docker_ready'], .5))} {ms(pct(row['docker_ready'], .95))}")
            print(f"{'  ratio':34} {pct(row['sandbox'], .5) / pct(row['docker_ready'], .5):9.2f}x "
                  f"{pct(row['sandbox'], .95) / pct(row['docker_ready'], .95):9.2f}x")
        print(f"{label + ' teardown (DELETE)':34} {ms(pct(row['teardown'], .5))} {ms(pct(row['teardown'], .95))}")
        print(f"{'  mean / stdev sandbox':34} {ms(statistics.mean(row['sandbox']))} {ms(statistics.pstdev(row['sandbox']))}")
        print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="iterations per case (default 20)")
    asyncio.run(main(parser.parse_args().n))
