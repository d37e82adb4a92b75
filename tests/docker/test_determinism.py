"""Determinism through the daemon: two sandboxes booted one after the other from the same spec
and seed run a program that prints the time, random numbers, hash order and the resolved
addresses of the sandbox's names, and print the same bytes; another seed prints other random
numbers; the frozen clock stands still while commands, sleeps and timeouts keep working."""
from __future__ import annotations

import pytest

from tests.support.engine import assert_released
from tests.support.specs import spec

pytestmark = pytest.mark.asyncio(loop_scope="module")

PROGRAM = r"""
import datetime, os, random, socket, subprocess, time, asyncio
print("time", time.time(), datetime.datetime.now().isoformat(), datetime.datetime.utcnow().isoformat())
print("date", subprocess.run(["date", "+%F %T %Z"], capture_output=True, text=True).stdout.strip())
print("random", [random.random() for _ in range(3)], random.randint(0, 10**9))
print("hash", hash("svc-determinism"), list({"alpha", "beta", "gamma", "delta"}))
print("seed", os.environ["SERVICE_SEED"], os.environ["PYTHONHASHSEED"])
for name in ("api", "sandbox", "api.example.com"):
    print("dns", name, socket.gethostbyname(name))
print("host", socket.gethostname())
t0 = time.monotonic(); time.sleep(0.2); asyncio.run(asyncio.sleep(0.1))
print("slept", time.monotonic() - t0 >= 0.3, time.time())
"""

DETERMINISTIC = spec(
    "deterministic",
    services=[{"name": "api", "type": "http_mock", "routes": [{"method": "GET", "path": "/", "response": {"body": "ok"}}]}],
    network={"dns_overrides": {"api.example.com": "api"}},
    determinism={"clock": "2024-03-01T12:00:00Z", "seed": 1234, "dns": "static"},
)


async def run_once(api, docker_client, **extra) -> str:
    body = await api.create_from_spec(DETERMINISTIC, **extra)
    assert body["state"] == "ready", body
    sid = body["id"]
    try:
        response, info = await api.post(f"/v1/sandboxes/{sid}/files", json={"path": "det.py", "content": PROGRAM})
        assert response.status == 201, info
        out = await api.run(sid, "python3 det.py")
        assert out["exit_code"] == 0, out
        frozen = await api.run(sid, "date +%s.%N; sleep 1.1; date +%s.%N; timeout 1 sleep 5; echo rc=$?")
        assert frozen["exit_code"] == 0, frozen
        first, second, rc = frozen["stdout"].split()
        assert first == second == "1709294400.000000000" and rc == "rc=124", frozen
        return out["stdout"]
    finally:
        await api.delete(f"/v1/sandboxes/{sid}")
        assert_released(docker_client, sid)


async def test_same_spec_and_seed_print_the_same_bytes_another_seed_does_not(api, docker_client):
    a = await run_once(api, docker_client)
    b = await run_once(api, docker_client)
    assert a == b
    lines = a.splitlines()
    assert lines[0] == "time 1709294400.0 2024-03-01T12:00:00 2024-03-01T12:00:00", a
    assert lines[1] == "date 2024-03-01 12:00:00 UTC"
    assert lines[4].startswith("seed 1234 ")
    dns = {line.split()[1]: line.split()[2] for line in lines if line.startswith("dns ")}
    assert dns["api.example.com"] == dns["api"] and dns["api"].startswith("10.213.")
    assert lines[-1] == "slept True 1709294400.0"

    c = await run_once(api, docker_client, seed="other-seed")
    pick = lambda text, key: [line for line in text.splitlines() if line.startswith(key)]  # noqa: E731
    assert pick(a, "time") == pick(c, "time")
    assert pick(a, "random") != pick(c, "random")
    assert pick(a, "seed") != pick(c, "seed")
