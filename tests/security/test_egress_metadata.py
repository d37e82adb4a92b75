"""Attack: a spec lists other clouds' metadata addresses in `network.egress.allow` (`100.100.100.200`,
Alibaba; `168.63.129.16`, Azure's wireserver; `169.254.170.2`, AWS ECS credentials), and the agent
asks the egress proxy for them; or the operator runs with SERVICE_EGRESS_ALLOW_PRIVATE=1 and the
agent asks for `fd00:ec2::254` (AWS over IPv6). The proxy refuses every one of them (403 naming the
metadata service) before connecting anywhere: its list is daemon/sandbox/programs/cloud_metadata.py,
the one the daemon's outbound guard (daemon/netguard.py) reads too.

Nothing leaves this machine, even on a proxy that would let a request through: once the sandbox is
ready the test takes the proxy off its outside network, leaving it only the sandbox's `internal`
network (which Docker does not forward anywhere), so a connection it tried ends in a 502 or a
timeout instead of the policy's 403 (what it did before cloud_metadata.py)."""
from __future__ import annotations

import json

import pytest
import pytest_asyncio

from daemon import netguard
from daemon.sandbox.programs import cloud_metadata, egress_proxy, model_gateway
from daemon.sandbox.programs.egress_proxy import Policy
from tests.support.specs import spec

ALLOWED_LITERALS = ["100.100.100.200", "168.63.129.16", "169.254.170.2"]


def test_the_proxy_and_the_outbound_guard_read_the_same_list():
    assert egress_proxy.metadata_address is cloud_metadata.metadata_address
    assert egress_proxy.metadata_host is cloud_metadata.metadata_host
    assert model_gateway.Policy is Policy
    assert netguard.METADATA_HOSTS is cloud_metadata.METADATA_HOSTS
    assert netguard.metadata_address is cloud_metadata.metadata_address
    for address in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2", "168.63.129.16", "fd20:ce::254"):
        assert address in cloud_metadata.METADATA_ADDRESSES, address
    for name in ("metadata.google.internal", "metadata.goog", "instance-data.ec2.internal"):
        assert name in cloud_metadata.METADATA_HOSTS, name


@pytest.mark.parametrize("address", sorted(cloud_metadata.METADATA_ADDRESSES))
def test_every_metadata_address_is_refused_by_both_whatever_the_allow_list_says(address):
    assert netguard.refused_address(address, allow_private=True), address
    for policy in (Policy(allow=[address]), Policy(default="allow"), Policy(default="allow", allow_private=True)):
        ok, why = policy.check_addresses(address, [address], 80)
        assert ok == [] and why, (address, policy)
    # also embedded in an IPv6 address (mapped, NAT64) the agent writes instead
    if ":" not in address:
        for embedded in (f"::ffff:{address}", f"64:ff9b::{address}"):
            assert netguard.forbidden_address(embedded), embedded
            assert Policy(allow=[embedded], allow_private=True).check_addresses(embedded, [embedded], 80)[0] == [], embedded


@pytest.mark.parametrize("name", sorted(cloud_metadata.METADATA_HOSTS))
def test_every_metadata_name_is_refused_by_both_before_it_is_resolved(name):
    decision = Policy(default="allow", allow=[name], allow_private=True).decide(name, 80)
    assert not decision.allowed and decision.reason == "metadata_address", decision
    assert name in netguard.METADATA_HOSTS


def test_a_sandbox_service_may_still_answer_for_a_metadata_name():
    """A spec that mocks GCP's metadata server maps the name to its own service: that is not the cloud's."""
    policy = Policy(services=["gcp-mock"], dns_overrides={"metadata.google.internal": "gcp-mock"})
    assert policy.decide("metadata.google.internal", 80).service == "gcp-mock"


# --- through a real sandbox ---------------------------------------------------------------------

def cut_off(docker_client, sandbox_id: str) -> None:
    """Take the sandbox's proxy off its outside network: a connection the proxy tried now has no route."""
    proxy = docker_client.containers.list(filters={"label": [f"svc.sandbox={sandbox_id}", "svc.role=proxy"]})[0]
    docker_client.api.disconnect_container_from_network(proxy.id, f"svc-{sandbox_id}-egress", force=True)


async def ask(engine_api, sandbox_id: str, url: str) -> tuple[str, dict]:
    out = await engine_api.run(sandbox_id, f"curl -sS -m 10 -o /tmp/answer -w '%{{http_code}}' '{url}'; echo; cat /tmp/answer")
    code, _, body = out["stdout"].partition("\n")
    try:
        return code, json.loads(body)
    except ValueError:
        return code, {"raw": out}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def allowing_sandbox(engine_api, docker_client):
    body = await engine_api.create_from_spec(spec("egress-metadata-literals", network={"egress": {
        "default": "deny", "allow": ALLOWED_LITERALS}}))
    assert body["state"] == "ready", body
    cut_off(docker_client, body["id"])
    yield body["id"]
    await engine_api.delete(f"/v1/sandboxes/{body['id']}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def operator_open_sandbox(engine_api, docker_client, monkeypatch_module):
    monkeypatch_module.setenv("SERVICE_EGRESS_ALLOW_PRIVATE", "1")  # the operator opens private addresses
    try:
        body = await engine_api.create_from_spec(spec("egress-metadata-open", network={"egress": {"default": "allow"}}))
    finally:
        monkeypatch_module.delenv("SERVICE_EGRESS_ALLOW_PRIVATE")
    assert body["state"] == "ready", body
    cut_off(docker_client, body["id"])
    yield body["id"]
    await engine_api.delete(f"/v1/sandboxes/{body['id']}")


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("literal", ALLOWED_LITERALS)
async def test_a_metadata_literal_in_allow_is_refused_by_the_proxy(engine_api, allowing_sandbox, literal):
    code, answer = await ask(engine_api, allowing_sandbox, f"http://{literal}/latest/meta-data/")
    assert code == "403" and answer.get("error") == "egress_refused", (code, answer)
    assert literal in answer["message"], answer
    assert "metadata" in answer["message"] or "link-local" in answer["message"], answer


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("url", ["http://[fd00:ec2::254]/latest/meta-data/", "http://100.100.100.200/latest/meta-data/",
                                 "http://[::ffff:100.100.100.200]/latest/meta-data/", "http://168.63.129.16/machine"])
async def test_not_even_the_operators_allow_private_opens_a_metadata_address(engine_api, operator_open_sandbox, url):
    code, answer = await ask(engine_api, operator_open_sandbox, url)
    assert code == "403" and "cloud metadata" in answer.get("message", ""), (code, answer)
