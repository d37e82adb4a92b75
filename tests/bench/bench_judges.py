"""Benchmark: judge calls through `daemon.judges.evaluate` (real SQLite store, cache off) at concurrency 8
against a local OpenAI chat-completions server answering in 50 ms.

Prints judgements/s (target >= 100/s), the same-run reference of bare HTTP posts to the same server at
the same concurrency, the ideal 8 / 0.05 s = 160/s, the ratios, and cached judgements/s. Asserts nothing.

    .venv/bin/python -m tests.bench.bench_judges [--calls 400] [--concurrency 8] [--delay 0.05]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import aiohttp

from daemon.judges import JudgeDefinition, evaluate
from daemon.judges.client import close_session
from daemon.store.db import Store
from tests.support.openai_server import OpenAIServer, Reply

DEFINITION = JudgeDefinition(rubric="Is the answer correct and complete?", threshold=0.5)


async def bounded(n: int, concurrency: int, one) -> float:
    """Seconds to run one(i) for i in range(n), at most `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def run(i: int) -> None:
        async with gate:
            await one(i)

    start = time.perf_counter()
    await asyncio.gather(*(run(i) for i in range(n)))
    return time.perf_counter() - start


async def bench(calls: int, concurrency: int, delay: float) -> None:
    with OpenAIServer() as llm, tempfile.TemporaryDirectory() as tmp:
        llm.respond = lambda body: Reply(content=json.dumps({"score": 0.8, "reason": "fine"}), delay_s=delay)
        os.environ.update(SERVICE_JUDGE_BASE_URL=llm.url, SERVICE_JUDGE_API_KEY="sk-bench", SERVICE_JUDGE_MODEL="bench")
        store = await Store.open(Path(tmp) / "svc.db")
        body = {"model": "bench", "messages": [{"role": "user", "content": "x"}]}

        async with aiohttp.ClientSession() as session:
            async def bare(i: int) -> None:
                async with session.post(llm.url + "/chat/completions", json=body) as response:
                    await response.read()

            bare_s = await bounded(calls, concurrency, bare)

        errors = 0

        async def judged(i: int, use_cache: bool = False) -> None:
            nonlocal errors
            verdict = await evaluate(store, DEFINITION, input=f"question {i}", output=f"answer {i}", use_cache=use_cache)
            errors += verdict.judge_error is not None

        judged_s = await bounded(calls, concurrency, judged)
        cached_s = await bounded(calls, concurrency, lambda i: judged(i, True))
        await close_session()
        await store.close()

    ideal = concurrency / delay
    rate, bare_rate = calls / judged_s, calls / bare_s
    print(f"judge calls: {calls} at concurrency {concurrency}, server answering in {delay * 1000:.0f} ms")
    print(f"  judgements/s (evaluate, cache off): {rate:8.1f}   target >= 100   judge errors: {errors}")
    print(f"  bare HTTP posts/s (same server):    {bare_rate:8.1f}")
    print(f"  ideal (concurrency / delay):         {ideal:8.1f}")
    print(f"  ratio evaluate / bare: {rate / bare_rate:.2f}   evaluate / ideal: {rate / ideal:.2f}")
    print(f"  cached judgements/s (no HTTP call):  {calls / cached_s:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.05)
    args = parser.parse_args()
    asyncio.run(bench(args.calls, args.concurrency, args.delay))


if __name__ == "__main__":
    main()
