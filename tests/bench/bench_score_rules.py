"""Benchmark: offline scoring with regex rules over 10,000 spans (target: under 3 s), against an
in-process daemon (real store, real HTTP), with the bare regex loop over the same texts as the
reference measured in the same run. Prints numbers, asserts nothing.

    .venv/bin/python -m tests.bench.bench_score_rules [--spans 10000]
"""
from __future__ import annotations

import argparse
import asyncio
import random
import time

import regex

from tests.support.api import start_api, stop_api
from tests.support.specs import spec_yaml

PATTERNS = (r"refund", r"\b\d{3}-\d{4}\b", r"(?i)sorry")
WORDS = "the customer asked about an order and the agent looked it up then replied with the status and a link".split()


def texts(n: int) -> list[str]:
    rng = random.Random(7)
    out = []
    for i in range(n):
        words = rng.choices(WORDS, k=40)
        if i % 3 == 0:
            words.insert(rng.randrange(40), "refund")
        if i % 5 == 0:
            words.insert(rng.randrange(40), f"{rng.randrange(100, 999)}-{rng.randrange(1000, 9999)}")
        out.append(" ".join(words))
    return out


def bare_loop(outputs: list[str], patterns: tuple[str, ...]) -> float:
    started = time.perf_counter()
    for pattern in patterns:
        compiled = regex.compile(pattern, regex.MULTILINE | regex.V0)
        for text in outputs:
            compiled.search(text, timeout=1.0)
    return time.perf_counter() - started


async def scoring_seconds(api, experiment_id: str, rule_ids: list[str]) -> float:
    started = time.perf_counter()
    response, accepted = await api.post(f"/v1/experiments/{experiment_id}/score", json={"rule_ids": rule_ids})
    assert response.status == 202, accepted
    while True:
        response, job = await api.get(f"/v1/score-jobs/{accepted['job_id']}")
        if job["status"] in ("completed", "failed"):
            assert job["status"] == "completed", job
            return time.perf_counter() - started
        await asyncio.sleep(0.05)


async def main(spans: int) -> None:
    api = await start_api()
    try:
        await api.upload_yaml(spec_yaml("bench"))
        response, experiment = await api.post("/v1/experiments", json={"spec_id": "bench"})
        outputs = texts(spans)
        for start in range(0, spans, 5000):
            events = [{"event_type": "llm_call", "experiment_id": experiment["id"], "input": "q", "output": text}
                      for text in outputs[start:start + 5000]]
            response, body = await api.post("/v1/traces", json={"events": events})
            assert body["accepted"] == len(events), body
        rule_ids = []
        for n, pattern in enumerate(PATTERNS):
            response, rule = await api.post("/v1/score-rules", json={"name": f"r{n}", "type": "regex", "pattern": pattern})
            rule_ids.append(rule["id"])
        one_ref = bare_loop(outputs, PATTERNS[:1])
        one = await scoring_seconds(api, experiment["id"], rule_ids[:1])
        all_ref = bare_loop(outputs, PATTERNS)
        every = await scoring_seconds(api, experiment["id"], rule_ids)
        print(f"regex scoring, {spans} spans x 1 rule:  {one:.2f} s (target < 3 s); bare regex loop {one_ref:.3f} s;"
              f" ratio {one / one_ref:.0f}x")
        print(f"regex scoring, {spans} spans x {len(PATTERNS)} rules: {every:.2f} s; bare regex loop {all_ref:.3f} s;"
              f" ratio {every / all_ref:.0f}x")
    finally:
        await stop_api(api)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=10_000)
    asyncio.run(main(parser.parse_args().spans))
