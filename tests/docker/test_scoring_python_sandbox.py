"""A python score rule runs in a throw-away sandbox of the stock python image, never on the host, and
its command reaches neither the network nor the host: a rule that tries to connect to a TCP server
this test listens with on every address of the host (and on the sandbox's gateway), and to a public
name, reports what it reached as its score. The host reaches the same server (so the probe works)."""
from __future__ import annotations

import base64
import json
import socket
import threading

import pytest
import pytest_asyncio

from daemon.sandbox.network import host_addresses
from tests.support.images import PYTHON
from tests.support.scores import add_llm_spans, create_rule, score
from tests.support.specs import spec_yaml
from daemon.appkeys import STORE

pytestmark = [pytest.mark.docker, pytest.mark.asyncio(loop_scope="module")]

# argv[1]: JSON [[host, port], ...]; the sandbox's default gateway is tried too. Scores 1 when
# anything answered, with what in the reason; 0 ("blocked") otherwise.
PROBE = r'''
import json, socket, sys
targets = [tuple(t) for t in json.loads(sys.argv[1])]
try:
    for fields in (line.split() for line in open("/proc/net/route").read().splitlines()[1:]):
        if fields[1] == "00000000":
            targets.append((socket.inet_ntoa(bytes.fromhex(fields[2])[::-1]), targets[0][1]))
except OSError:
    pass
reached = []
for host, port in targets:
    try:
        socket.create_connection((host, port), timeout=3).close()
        reached.append(f"{host}:{port}")
    except OSError:
        pass
for line in sys.stdin:
    span = json.loads(line)
    print(json.dumps({"span_id": span["span_id"], "score": 1.0 if reached else 0.0,
                      "reason": ("reached " + ",".join(reached)) if reached else "blocked"}))
'''


def probe_command(targets: list[tuple[str, int]]) -> str:
    encoded = base64.b64encode(PROBE.encode()).decode()
    return f"echo {encoded} | base64 -d > /tmp/probe.py && python3 /tmp/probe.py '{json.dumps(targets)}'"


@pytest.fixture(scope="module")
def listener():
    """A TCP server on 0.0.0.0 of the host accepting (and closing) every connection; its port."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def targets_for(port: int) -> list[tuple[str, int]]:
    return [(address, port) for address in sorted(host_addresses()) if ":" not in address] + [("example.com", 80)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def probed(api, listener):
    await api.upload_yaml(spec_yaml("netprobe"))
    response, experiment = await api.post("/v1/experiments", json={"spec_id": "netprobe"})
    assert response.status == 201, experiment
    await add_llm_spans(api, experiment["id"], ["one", "two"])
    rule = await create_rule(api, name="probe", type="python", command=probe_command(targets_for(listener)))
    job = await score(api, experiment["id"], [rule["id"]], timeout=180)
    assert job["status"] == "completed", job
    response, scores = await api.get(f"/v1/scores?experiment_id={experiment['id']}")
    return {"job": job, "rows": scores["items"]}


async def test_the_host_itself_reaches_the_probed_server(listener):
    reached = []
    for host, port in targets_for(listener)[:-1]:
        with socket.create_connection((host, port), timeout=3):
            reached.append(host)
    assert reached and "127.0.0.1" in reached


async def test_the_rule_command_reaches_neither_the_host_nor_the_network(probed):
    assert [(r["score"], r["reason"]) for r in probed["rows"]] == [(0.0, "blocked"), (0.0, "blocked")]


async def test_the_rule_ran_in_one_sandbox_of_the_stock_python_image(api, probed):
    rows = await api.app[STORE].fetchall("SELECT image, state, metadata FROM sandboxes")
    mine = [(r["image"], r["state"]) for r in rows if probed["job"]["id"] in (r["metadata"] or "")]
    assert mine == [(PYTHON, "stopped")]
