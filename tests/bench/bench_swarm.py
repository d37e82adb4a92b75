"""Sandbox-shaped boots on the local swarm vs the local engine, same run; reaping after a node is killed.

    .venv/bin/python -m tests.bench.bench_swarm [-n 5]

Brings the swarm up first (swarm/cluster.py up, idempotent). One "sandbox" is what boot.py starts
through a driver: an internal network, the agent, postgres (ready when pg_isready answers from the
agent) and redis; then everything removed. It runs through `SwarmDriver` (agent and postgres on
different nodes) and through the local `DockerDriver`, interleaved, and prints p50/p95 and the
ratio. Then a 12-scenario experiment (trivial cli agent, concurrency 4) through the real daemon app
on each engine (SERVICE_ENGINE=docker and swarm). Then it kills a worker node under a running agent and prints how long the driver took to
name the lost node, to remove the sandbox from the manager, and for the node to be clean once back.
"""
from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
import uuid

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


async def experiment_on(engine: str, settings, scenarios: int = 12, concurrency: int = 4) -> dict:
    """Seconds for one experiment of `scenarios` replicas through a real daemon app on `engine`."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from aiohttp.test_utils import TestClient, TestServer

    from daemon.app import create_app
    from daemon.config import Settings
    from tests.bench.bench_scale import spec
    from tests.bench.experiments import admin_headers, finished, launch

    home = Path(tempfile.mkdtemp(prefix="svc-bench-swarm-", dir="/tmp"))
    os.environ["SERVICE_MAX_CONCURRENT_RUNS"] = str(concurrency)
    # the swarm's engines, images and TLS client certificate (SERVICE_SWARM_CERT_PATH)
    swarm = {} if engine == "docker" else {k: v for k, v in daemon_overrides(settings).items() if k != "engine"}
    app_settings = Settings(home=home, socket_path=home / "svcd.sock", port=0, engine=engine, **swarm)
    client = TestClient(TestServer(create_app(app_settings)))
    await client.start_server()
    try:
        headers = admin_headers(app_settings)
        experiment_id, started = await launch(client, headers, "bench-scale", spec(scenarios), concurrency)
        record = await finished(client, headers, experiment_id, 0.5)
        runs = [r for s in record["scenarios"] for r in s["runs"]]
        return {"elapsed_s": time.perf_counter() - started, "runs": len(runs),
                "passed": sum(r["status"] == "passed" for r in runs)}
    finally:
        await client.close()
        shutil.rmtree(home, ignore_errors=True)


async def main(rounds: int) -> None:
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
        elapsed = {}
        for engine in ("docker", "swarm"):
            result = await experiment_on(engine, settings)
            elapsed[engine] = result["elapsed_s"]
            print(f"12-scenario experiment (concurrency 4) on {engine:6}: {result['elapsed_s']:.1f}s, "
                  f"{result['passed']}/{result['runs']} passed")
        print(f"experiment swarm / docker: {elapsed['swarm'] / elapsed['docker']:.2f}x")
        for key, value in (await reap_after_kill(settings, swarm)).items():
            print(f"node killed -> {key}: {value:.2f}s")
    finally:
        await swarm.close()
        await local.close()
        remove_labelled(settings, {"svc.daemon": "bench-swarm"})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=5)
    asyncio.run(main(parser.parse_args().n))
