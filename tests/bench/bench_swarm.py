"""The local swarm beside the local engine, same run: boots, pooled boots, throughput, node loss.

    .venv/bin/python -m tests.bench.bench_swarm [-n 5] [--scenarios 24] [--concurrency 8]

Brings the swarm up first (swarm/cluster.py up, idempotent). Prints, asserting nothing:
1. Sandbox-shaped boots through the drivers: an internal network, the agent, postgres (ready when
   pg_isready answers from the agent) and redis, then everything removed; `SwarmDriver` (agent and
   postgres on different nodes) and the local `DockerDriver` interleaved; p50/p95 and the ratio.
2. A bare sandbox from a spec through a real daemon app on each engine, create -> ready as the API
   measures it (`boot.ms`): cold (a new shape each time) and pooled (the warm pool, refilled between).
3. `--scenarios` trivial scenarios at `--concurrency` through a real daemon app: the local engine, the
   swarm with both nodes, and the swarm with the worker drained (one node); each agent reserves 0.5 CPU,
   so the two nodes hold twice the sandboxes one does. Per-sandbox time swarm/local, 2 nodes/1 node.
4. A worker killed under a running agent: how long the driver took to name the lost node, to remove
   the sandbox from the manager, and for the node to be clean once back.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

import yaml
from aiohttp.test_utils import TestClient

from daemon.sandbox.engine import ContainerSpec
from daemon.sandbox.engine.docker import DockerDriver
from daemon.sandbox.engine.swarm.driver import NodeLost, SwarmDriver
from tests.bench.bench_sandbox import pct
from tests.support.swarm import (POSTGRES, PYTHON, daemon_overrides, labelled_containers, node_back, remove_labelled,
                                 swarm_up)

REDIS = "localhost/svc/redis:7"


async def boot_and_remove(driver, nodes: list[str] | None) -> float:
    """Seconds from nothing to a ready sandbox (removal not counted)."""
    sid = uuid.uuid4().hex[:8]
    labels = {"svc.daemon": "bench-swarm", "svc.sandbox": sid}
    net = f"svcb-{sid}"

    def spec(role: str, image: str, node: str | None, **extra) -> ContainerSpec:
        place = {"svc.place": node} if node else {}
        return ContainerSpec(name=f"svcb-{sid}-{role}", image=image, network=net, aliases=[role],
                             labels={**labels, **place}, init=True, **extra)

    started = time.perf_counter()
    ids: list[str] = []
    try:
        await driver.create_network(net, labels, internal=True)
        agent, db, _ = await asyncio.gather(
            driver.run_container(spec("agent", PYTHON, nodes[0] if nodes else None, command=["sleep", "infinity"])),
            driver.run_container(spec("db", POSTGRES, nodes[1] if nodes else None, env={"POSTGRES_PASSWORD": "b"})),
            driver.run_container(spec("cache", REDIS, None)),
        )
        ids = [agent.id, db.id, _.id]
        probe = "until pg_isready -q -h db; do sleep 0.05; done; redis-cli -h cache ping >/dev/null"
        await driver.exec(agent.id, ["sh", "-c", probe], watchdog_s=60)
        return time.perf_counter() - started
    finally:
        await asyncio.gather(*(driver.remove_container(i) for i in ids), return_exceptions=True)
        for _attempt in range(50):
            try:
                await driver.remove_network(net)
                break
            except Exception:
                await asyncio.sleep(0.2)


async def reap_after_kill(settings, driver: SwarmDriver) -> dict[str, float]:
    node = list(settings.nodes)[1]
    labels = {"svc.daemon": "bench-swarm-reap"}
    agent = await driver.run_container(ContainerSpec(name=f"svcb-{uuid.uuid4().hex[:8]}-agent", image=PYTHON,
                                                     command=["sleep", "infinity"], labels={**labels, "svc.place": node}))
    killed = time.perf_counter()
    subprocess.run(["docker", "kill", node], check=True, capture_output=True)
    out: dict[str, float] = {}
    try:
        await driver.exec(agent.id, ["true"])
    except NodeLost:
        out["lost_named_s"] = time.perf_counter() - killed
    services, _ = await driver.list_labelled(labels)
    for service in services:
        await driver.remove_container(service["Id"])
    out["reaped_on_manager_s"] = time.perf_counter() - killed
    subprocess.run(["docker", "start", node], check=True, capture_output=True)
    while not (node_back(settings, node) and labelled_containers(settings, labels) == {}):
        await asyncio.sleep(0.1)
    out["node_back_and_clean_s"] = time.perf_counter() - killed
    return out


@contextlib.asynccontextmanager
async def daemon_on(engine: str, settings, **extra: Any) -> AsyncIterator[tuple[TestClient, dict[str, str]]]:
    """A real daemon app whose sandboxes run on `engine` (docker or swarm): (client, admin headers)."""
    from aiohttp.test_utils import TestServer

    from daemon.app import create_app
    from daemon.config import Settings
    from tests.bench.experiments import admin_headers

    home = Path(tempfile.mkdtemp(prefix="svc-bench-swarm-", dir="/tmp"))
    # the swarm's engines, images and TLS client certificate (SERVICE_SWARM_CERT_PATH)
    swarm = {} if engine == "docker" else {k: v for k, v in daemon_overrides(settings).items() if k != "engine"}
    app_settings = Settings(home=home, socket_path=home / "svcd.sock", port=0, engine=engine, **swarm, **extra)
    client = TestClient(TestServer(create_app(app_settings)))
    await client.start_server()
    try:
        yield client, admin_headers(app_settings)
    finally:
        await client.close()
        shutil.rmtree(home, ignore_errors=True)


def trivial_spec(scenarios: int, cpus: float) -> str:
    """bench_scale's trivial scenario, each agent limited (and, on a swarm, reserving) `cpus`."""
    from tests.bench.bench_scale import spec

    doc = yaml.safe_load(spec(scenarios))
    doc["resources"]["cpus"] = cpus
    return yaml.safe_dump(doc, sort_keys=False)


async def experiment_on(engine: str, settings, scenarios: int, concurrency: int, cpus: float = 1.0) -> dict:
    """One experiment of `scenarios` trivial replicas through a real daemon app on `engine`."""
    from tests.bench.experiments import finished, launch

    os.environ["SERVICE_MAX_CONCURRENT_RUNS"] = str(concurrency)
    async with daemon_on(engine, settings, max_running_per_tenant=concurrency) as (client, headers):
        experiment_id, started = await launch(client, headers, "bench-scale", trivial_spec(scenarios, cpus), concurrency)
        record = await finished(client, headers, experiment_id, 0.5)
        elapsed = time.perf_counter() - started
        runs = [r for s in record["scenarios"] for r in s["runs"]]
        return {"elapsed_s": elapsed, "runs": len(runs), "passed": sum(r["status"] == "passed" for r in runs),
                "per_min": len(runs) / elapsed * 60}


async def boots_through_the_api(engine: str, settings, rounds: int) -> dict[str, list[float]]:
    """Create -> ready of a bare sandbox from a spec, as the API measures it (its `boot.ms`): cold (a
    daemon without a pool) and pooled (a daemon with one pooled sandbox, refilled between rounds)."""
    text = yaml.safe_dump({"version": 1, "id": "bench-boot", "base": PYTHON, "task": {"prompt": "x"},
                           "agent": {"type": "cli", "binary": "sh"},
                           "invariants": {"ok": {"check": {"type": "file_exists", "path": "x"}}}})
    out: dict[str, list[float]] = {"cold": [], "pooled": []}
    for kind, pool_size in (("cold", 0), ("pooled", 1)):
        async with daemon_on(engine, settings, pool_size=pool_size) as (client, headers):
            response = await client.post("/v1/specs", json={"name": "bench-boot", "yaml": text}, headers=headers)
            assert response.status in (200, 201), await response.text()

            async def create() -> dict:
                response = await client.post("/v1/sandboxes", json={"spec_id": "bench-boot"}, headers=headers)
                body = await response.json()
                assert response.status == 201 and body["state"] == "ready", body
                await client.delete(f"/v1/sandboxes/{body['id']}", headers=headers)
                return body

            async def refilled() -> None:
                for _ in range(1200):
                    response = await client.get("/v1/health", headers=headers)
                    if sum((await response.json())["sandbox_pool"]["pooled"].values()) >= 1:
                        return
                    await asyncio.sleep(0.1)
                raise RuntimeError("the pool did not refill in 120 s")

            await create()  # warm (and, with the pool, the shape asked for once)
            for _ in range(rounds):
                if pool_size:
                    await refilled()
                body = await create()
                assert body["boot"]["pooled"] == bool(pool_size), body
                out[kind].append(body["boot"]["ms"] / 1000)
    return out


def set_availability(settings, node: str, availability: str) -> None:
    """Drain a node (no sandbox is placed there) or make it active again."""
    client = settings.api_client(settings.manager, timeout=30)
    try:
        found = client.inspect_node(node)
        client.update_node(found["ID"], found["Version"]["Index"], {**found["Spec"], "Availability": availability})
    finally:
        client.close()


async def main(rounds: int, scenarios: int, concurrency: int) -> None:
    settings = swarm_up()
    swarm, local = SwarmDriver(settings), DockerDriver()
    nodes = list(settings.nodes)[:2]
    try:
        await boot_and_remove(swarm, nodes)  # warm: images pulled on every node
        await boot_and_remove(local, None)
        times: dict[str, list[float]] = {"swarm": [], "local": []}
        for _ in range(rounds):
            times["swarm"].append(await boot_and_remove(swarm, nodes))
            times["local"].append(await boot_and_remove(local, None))
        for name, values in times.items():
            print(f"sandbox (network+agent+postgres+redis) create->ready on {name:5}: "
                  f"p50 {pct(values, 0.5):.2f}s  p95 {pct(values, 0.95):.2f}s  (n={len(values)})")
        print(f"swarm / local (p50): {pct(times['swarm'], 0.5) / pct(times['local'], 0.5):.2f}x")

        boots = {engine: await boots_through_the_api(engine, settings, rounds) for engine in ("docker", "swarm")}
        for kind in ("cold", "pooled"):
            local_p50, swarm_p50 = pct(boots["docker"][kind], 0.5), pct(boots["swarm"][kind], 0.5)
            print(f"bare sandbox from a spec, {kind:6} create->ready (API boot.ms, p50): local {local_p50 * 1000:.0f} ms, "
                  f"swarm {swarm_p50 * 1000:.0f} ms = {swarm_p50 / local_p50:.2f}x")

        # each agent reserves 0.5 CPU on the swarm: `concurrency` fit on the two nodes, half on one
        per_min = {}
        for label, engine in (("local engine", "docker"), ("swarm, 2 nodes", "swarm")):
            result = await experiment_on(engine, settings, scenarios, concurrency, cpus=0.5)
            per_min[label] = result["per_min"]
            print(f"{scenarios} trivial scenarios at concurrency {concurrency} on the {label:15}: "
                  f"{result['per_min']:.1f}/min ({result['passed']}/{result['runs']} passed)")
        worker = nodes[1]
        set_availability(settings, worker, "drain")
        try:
            result = await experiment_on("swarm", settings, scenarios, concurrency, cpus=0.5)
        finally:
            set_availability(settings, worker, "active")
        per_min["swarm, 1 node"] = result["per_min"]
        print(f"{scenarios} trivial scenarios at concurrency {concurrency} on the swarm, 1 node : "
              f"{result['per_min']:.1f}/min ({result['passed']}/{result['runs']} passed; {worker} drained)")
        print(f"per sandbox, swarm (2 nodes) / local: {per_min['local engine'] / per_min['swarm, 2 nodes']:.2f}x the time; "
              f"2 nodes / 1 node: {per_min['swarm, 2 nodes'] / per_min['swarm, 1 node']:.2f}x the throughput")

        for key, value in (await reap_after_kill(settings, swarm)).items():
            print(f"node killed -> {key}: {value:.2f}s")
    finally:
        await swarm.close()
        await local.close()
        remove_labelled(settings, {"svc.daemon": "bench-swarm"})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=5, help="rounds of each boot measurement")
    parser.add_argument("--scenarios", type=int, default=24, help="scenarios per throughput experiment")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.scenarios, args.concurrency))
