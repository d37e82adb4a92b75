"""Findings 7 and 8 of issue 36 (the model gateway's budgets and sizes), each driven by a hostile
agent in a real sandbox through the real gateway against the fake provider (tests/support/provider_server.py):

* 12 parallel streamed calls that never ask for usage (and a provider that sends none) against
  `max_tokens: 3000, max_cost_usd: 0.0005`: before, all 12 reached the provider and the run's spend
  was 0 tokens, $0; now each is counted (an estimate) and calls in flight hold the budget;
* streams the agent disconnects from after the first chunk: before, counted as nothing;
* unknown models: `o1-pro` was priced as `o1`, `mystery-model` not at all; now both at the highest
  known price, `highest_priced_calls` says so;
* 40 request bodies of 16 MiB: before, recorded whole (671 MB kept, the daemon's memory +650 MB);
  now a 413 in OpenAI's shape, recorded as metadata; and the run's recording capped
  (SERVICE_GATEWAY_MAX_RECORDING, 8 MiB here): calls past it recorded as `truncated`."""
from __future__ import annotations

import json
import os
import resource

import pytest
import pytest_asyncio

from daemon.sandbox.model_gateway import pricing_table
from tests.support.api import Api, start_api, stop_api
from tests.support.hosts import docker0_address
from tests.support.provider_server import ProviderServer, Turn
from tests.support.runs import inv, run_spec, upload
from tests.support.sdk_image import sdk_image

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY = "sk-budgettest-0123456789abcdef0123"

COMMON = r'''
import json, os, http.client, urllib.request, urllib.error, concurrent.futures
gw = os.environ["OPENAI_BASE_URL"]
token = os.environ["OPENAI_API_KEY"]
auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

def post(body, path="/chat/completions"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(gw + path, data=data, method="POST", headers=auth)
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except Exception as e:
        return type(e).__name__, b""
'''

BURST = COMMON + r'''
body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "tell me a long story"}]}
with concurrent.futures.ThreadPoolExecutor(12) as pool:
    codes = sorted(str(c) for c, _ in pool.map(lambda _: post(body), range(12)))
open("/workspace/out.json", "w").write(json.dumps(codes))
'''

CUT = COMMON + r'''
out = []
for i in range(3):
    c = http.client.HTTPConnection("svc-models", 8480, timeout=30)
    c.request("POST", "/openai/chat/completions", json.dumps({"model": "gpt-4o-mini", "stream": True,
              "messages": [{"role": "user", "content": f"story {i}"}]}), auth)
    r = c.getresponse()
    out.append(r.read1(64).decode("latin-1")[:10])  # the first bytes, then gone
    c.sock.close()
    c.close()
open("/workspace/out.json", "w").write(json.dumps(out))
'''

UNKNOWN = COMMON + r'''
out = [post({"model": m, "messages": [{"role": "user", "content": "hi"}]})[0] for m in ("o1-pro", "mystery-model")]
open("/workspace/out.json", "w").write(json.dumps(out))
'''

HUGE = COMMON + r'''
prefix = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "'
body = prefix + b"x" * (16 * 1024 * 1024 - len(prefix) - 4) + b'"}]}'
out = {}
for i in range(40):
    code, answer = post(body)
    try:
        error = json.loads(answer)["error"]
        key = f"{code} {error['type']} {error['code']}"
    except Exception:
        key = f"{code} {answer[:100]!r}"
    out[key] = out.get(key, 0) + 1
open("/workspace/out.json", "w").write(json.dumps(out))
'''

BIG = COMMON + r'''
body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "y" * (3 * 1024 * 1024)}]}
open("/workspace/out.json", "w").write(json.dumps([post(body)[0] for _ in range(5)]))
'''


@pytest.fixture(scope="module", autouse=True)
def private_upstreams():
    os.environ["SERVICE_EGRESS_ALLOW_PRIVATE"] = "1"  # the provider is on this host
    yield
    os.environ.pop("SERVICE_EGRESS_ALLOW_PRIVATE", None)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def engine_api(stock_images) -> Api:
    """The module's daemon on the real engine, with an 8 MiB recording cap (SERVICE_GATEWAY_MAX_RECORDING)."""
    instance = await start_api(gateway_max_recording=8 * 1024**2)
    yield instance
    await stop_api(instance)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def provider(docker_client):
    with ProviderServer(host="0.0.0.0") as server:
        server.host_ip = docker0_address(docker_client)  # type: ignore[attr-defined]
        yield server


async def attack(engine_api, docker_client, provider, name: str, program: str, budget: dict | None = None,
                 respond=None) -> tuple[dict, object, list]:
    """(the run, the agent's out.json, the requests the provider got)."""
    provider.requests.clear()
    provider.respond = respond or (lambda request: Turn(text="ok"))
    doc = {
        "version": 1, "id": f"gw-{name}", "base": sdk_image(docker_client), "task": {"prompt": "spend"},
        "agent": {"type": "cli", "binary": "python3", "args": ["-c", program], "timeout": "150s"},
        "secrets": {"OPENAI_KEY": "env"},
        "models": {"providers": {"openai": {"key": "OPENAI_KEY",
                                            "base_url": f"http://{provider.host_ip}:{provider.port}/v1"}},
                   **({"budget": budget} if budget else {})},
        "invariants": {"out": inv({"type": "file_content", "path": "out.json", "equals": "-"})},  # fails: shows it
        "resources": {"timeout": "4m"},
    }
    await upload(engine_api, doc)
    run = await run_spec(engine_api, spec_id=f"gw-{name}", secrets={"OPENAI_KEY": KEY})
    evidence = next(r for r in run["invariant_results"] if r["invariant_id"] == "out")["evidence"]
    assert "content" in evidence, (run["error"], evidence)
    return run, json.loads(evidence["content"]), list(provider.requests)


def recording_lines(engine_api, run: dict) -> tuple[int, list[dict]]:
    digest = run["reproducer"]["pins"]["model_recording"]
    path = next(p for p in (engine_api.home / "recordings").rglob(digest))
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return path.stat().st_size, [line for line in lines if not line.get("open")]  # admission lines left out


async def test_streams_without_usage_cannot_all_spend_past_the_budget(engine_api, docker_client, provider):
    """Each answer is ~1200 characters and the provider reports no usage even when asked."""
    run, codes, seen = await attack(
        engine_api, docker_client, provider, "burst", BURST, budget={"max_tokens": 3000, "max_cost_usd": 0.0005},
        respond=lambda request: Turn(text="once upon a time " * 70, usage=False, pieces=6, gap_s=0.05))
    models = run["models"]
    assert (len(seen) < 12, codes.count("429") == 12 - len(seen), models["calls"] == len(seen),
            models["estimated_calls"] == len(seen), models["output_tokens"] > 0, run["error"]["code"]) == \
        (True, True, True, True, True, "budget_exceeded"), (len(seen), codes, models)
    assert all(r["body"]["stream_options"] == {"include_usage": True} for r in seen), [r["body"] for r in seen]


async def test_a_stream_the_agent_cuts_is_counted(engine_api, docker_client, provider):
    run, firsts, seen = await attack(
        engine_api, docker_client, provider, "cut", CUT,
        respond=lambda request: Turn(text="word " * 400, pieces=40, gap_s=0.05, input_tokens=900, output_tokens=400))
    models = run["models"]
    assert (len(seen), models["calls"], models["estimated_calls"], models["input_tokens"] > 0,
            models["output_tokens"] > 0, models["cost_usd"] > 0) == (3, 3, 3, True, True, True), (firsts, models)


async def test_unknown_models_are_counted_at_the_highest_known_price(engine_api, docker_client, provider):
    run, codes, seen = await attack(engine_api, docker_client, provider, "unknown", UNKNOWN,
                                    respond=lambda request: Turn(text="ok", input_tokens=1000, output_tokens=1000))
    table = pricing_table().values()
    highest = (max(p[0] for p in table) * 1000 + max(p[1] for p in table) * 1000) / 1e6
    models = run["models"]
    assert (codes, len(seen), models["highest_priced_calls"], models["unpriced_calls"]) == ([200, 200], 2, 2, 0), models
    assert models["cost_usd"] == pytest.approx(2 * highest, rel=1e-4), models
    _, lines = recording_lines(engine_api, run)
    assert [line.get("priced_as") for line in lines] == ["highest_known", "highest_known"]


async def test_huge_request_bodies_are_refused_not_recorded(engine_api, docker_client, provider):
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run, answers, seen = await attack(engine_api, docker_client, provider, "huge", HUGE)
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    size, lines = recording_lines(engine_api, run)
    assert (answers, seen, run["models"]["calls"]) == ({"413 invalid_request_error request_too_large": 40}, [], 0)
    assert (len(lines), size < 64 * 1024, {line["refused"]["reason"] for line in lines},
            any("request" in line and line["request"] for line in lines)) == \
        (40, True, {"request_too_large"}, False), size
    assert (rss_after - rss_before) * 1024 < 100 * 1024**2, (rss_before, rss_after)  # ru_maxrss is in KiB


async def test_the_recording_of_a_run_is_capped(engine_api, docker_client, provider):
    run, codes, seen = await attack(engine_api, docker_client, provider, "big", BIG)
    size, lines = recording_lines(engine_api, run)
    assert (codes, len(seen), run["models"]["truncated_calls"]) == ([200] * 5, 5, 3), run["models"]
    assert size < 8 * 1024**2 and [bool(line.get("truncated")) for line in lines] == [False, False, True, True, True]
    assert all(line.get("request") is None and "body" not in line for line in lines[2:]), lines[2]
