"""Benchmark: the alert outbox's delivery rate to a local HTTP receiver against the same number of
plain aiohttp POSTs (the reference, measured in the same run); and the delay from an experiment's
completion (its `finished_at`) to its alert arriving at the receiver, for experiments run through
the real engine with the fake scenario runner, against the issue's 1 s. Prints numbers; asserts nothing.

    .venv/bin/python -m tests.bench.bench_alerts [--notifications 500] [--experiments 20]
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from daemon.alerts.outbox import notification
from daemon.api.alerts import WORKER
from daemon.app import create_app
from daemon.config import Settings
from daemon.store import alerts as alert_store
from tests.support.receivers import HttpReceiver
from daemon.appkeys import DEFAULT_TENANT_ID, RUN_SCENARIO, STORE


async def reference(url: str, n: int, concurrency: int = 50) -> float:
    gate = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session:
        async def one() -> None:
            async with gate, session.post(url, json={"n": 1}) as response:
                await response.read()

        started = time.perf_counter()
        await asyncio.gather(*[one() for _ in range(n)])
        return time.perf_counter() - started


async def outbox(app: web.Application, rule: dict, n: int, receiver: HttpReceiver) -> float:
    store = app[STORE]
    rows = [notification(rule, "alert.fired", f"bench:{i}", {"n": i}, rule_id=rule["id"]) for i in range(n)]
    before = len(receiver.calls)
    started = time.perf_counter()
    async with store.transaction() as tx:
        for row in rows:
            await alert_store.enqueue(tx, row)
    app[WORKER].wake()
    while len(receiver.calls) - before < n:
        await asyncio.sleep(0.005)
    return time.perf_counter() - started


async def main(n: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="svc-bench-al-", dir="/tmp"))
    receiver = await HttpReceiver().start()
    app = create_app(Settings(home=home, socket_path=home / "s.sock", port=0, rate_limit_per_s=1e6, rate_limit_burst=10**6,
                                outbound_allow_private=True))  # the receiver listens on 127.0.0.1
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        from daemon.alerts.rules import build_rule, create_rule

        rule = await build_rule(app[DEFAULT_TENANT_ID], {"name": "bench", "condition": "pass_rate < 1", "notify": "webhook",
                                                           "webhook_url": receiver.url})
        await create_rule(app[STORE], rule)
        rule = await alert_store.get_rule(app[STORE], rule["id"])
        ref = await reference(receiver.url, n)
        took = await outbox(app, rule, n, receiver)
        print(f"plain aiohttp POSTs (concurrency 50): {n} in {ref:.3f}s = {n / ref:.0f}/s")
        print(f"alert outbox (enqueue + worker + signed POST + attempt record): {n} in {took:.3f}s = {n / took:.0f}/s")
        print(f"ratio outbox/reference time: {took / ref:.2f}x")
    finally:
        await receiver.stop()
        await runner.cleanup()
        shutil.rmtree(home, ignore_errors=True)


async def completion_to_alert(experiments: int) -> None:
    """finished_at -> the alert's arrival at the receiver, per experiment (each fires the rule once)."""
    from datetime import datetime

    from aiohttp.test_utils import TestClient, TestServer

    from tests.support.api import Api, default_key, make_settings
    from tests.support.experiments import FakeRunner, run_experiment, upload
    from tests.support.specs import spec_yaml

    home = Path(tempfile.mkdtemp(prefix="svc-bench-al2-", dir="/tmp"))
    receiver = await HttpReceiver().start()
    settings = make_settings(home)
    app = create_app(settings)
    app[RUN_SCENARIO] = FakeRunner()
    client = TestClient(TestServer(app))
    await client.start_server()
    api = Api(client, default_key(settings), home)
    try:
        await api.post("/v1/alerts", json={"name": "low", "condition": "pass_rate < 0.8", "notify": "webhook", "webhook_url": receiver.url})
        await upload(api, spec_yaml(matrix=[{"mode": "fail"}]))
        delays = []
        for n in range(experiments):
            done = await run_experiment(api, name=f"e{n}", spec_id="demo")
            await receiver.wait_calls(n + 1)
            arrived = receiver.arrived_at[n]
            delays.append(arrived - datetime.fromisoformat(done["finished_at"]).timestamp())
        delays.sort()
        p50, worst = delays[len(delays) // 2], delays[-1]
        print(f"experiment completion -> alert at the receiver ({experiments} experiments): p50 {p50 * 1000:.1f} ms, "
              f"max {worst * 1000:.1f} ms; ratio max/1 s target: {worst:.3f}x")
    finally:
        await receiver.stop()
        await client.close()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--notifications", type=int, default=500)
    parser.add_argument("--experiments", type=int, default=20)
    options = parser.parse_args()
    asyncio.run(main(options.notifications))
    asyncio.run(completion_to_alert(options.experiments))
