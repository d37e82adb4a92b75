"""The egress proxy's policy and redaction functions (pure; the behaviour tests with real
containers are in tests/docker/test_egress.py)."""
from __future__ import annotations

import contextlib
import ipaddress
import ssl

import pytest

from daemon.sandbox.programs.egress_proxy import (
    REDACTED,
    Policy,
    address_refusal,
    redact_headers,
    redact_path,
    server_name,
    sni_refusal,
    split_host_port,
)


def test_default_deny_and_empty_allow_list_allow_nothing():
    policy = Policy()
    d = policy.decide("example.com", 443)
    assert not d.allowed and d.reason == "denied_by_policy"
    assert "example.com:443" in d.message
    assert not Policy(default="deny", allow=[]).decide("a.b", 80).allowed


def test_allow_rules_exact_glob_star_and_port():
    policy = Policy(allow=["api.example.com", "*.svc.test", "pinned.example.org:8443"])
    assert policy.decide("api.example.com", 443).allowed
    assert policy.decide("API.Example.COM.", 80).allowed  # case and trailing dot
    assert not policy.decide("www.example.com", 443).allowed
    assert policy.decide("a.svc.test", 443).allowed
    assert policy.decide("a.b.svc.test", 443).allowed
    assert not policy.decide("svc.test", 443).allowed  # the glob needs a label before the dot
    assert not policy.decide("evilsvc.test", 443).allowed
    assert policy.decide("pinned.example.org", 8443).allowed
    assert not policy.decide("pinned.example.org", 443).allowed
    assert Policy(allow=["*"]).decide("anything.at.all", 1).allowed
    assert Policy(default="allow").decide("anything", 80).allowed


def test_own_services_and_dns_overrides_always_allowed():
    policy = Policy(services=["db", "mock"], dns_overrides={"api.stripe.com": "mock"})
    d = policy.decide("mock", 80)
    assert d.allowed and d.service == "mock"
    d = policy.decide("API.STRIPE.COM", 443)
    assert d.allowed and d.service == "mock"
    assert not policy.decide("api.github.com", 443).allowed


@pytest.mark.parametrize(
    "addr, refused",
    [
        ("10.1.2.3", True), ("172.17.0.2", True), ("192.168.1.1", True), ("127.0.0.1", True),
        ("169.254.169.254", True), ("100.64.0.1", True), ("0.0.0.0", True), ("224.0.0.1", True),
        ("::1", True), ("fe80::1", True), ("fd00::1", True), ("::ffff:10.0.0.1", True),
        ("93.184.216.34", False), ("2606:2800:220:1:248:1893:25c8:1946", False), ("1.1.1.1", False),
    ],
)
def test_address_refusal(addr, refused):
    assert (address_refusal(addr) is not None) is refused


def test_check_addresses_keeps_public_and_honours_allow_private():
    policy = Policy(allow=["x.test"])
    ok, why = policy.check_addresses("x.test", ["10.0.0.5", "93.184.216.34"])
    assert ok == ["93.184.216.34"] and why is None
    ok, why = policy.check_addresses("x.test", ["10.0.0.5", "169.254.169.254"])
    assert ok == [] and "10.0.0.5" in why and "x.test" in why
    ok, why = Policy(allow=["x.test"], allow_private=True).check_addresses("x.test", ["10.0.0.5"])
    assert ok == ["10.0.0.5"] and why is None


def test_split_host_port():
    assert split_host_port("Example.com:8080", 80) == ("example.com", 8080)
    assert split_host_port("example.com", 443) == ("example.com", 443)
    assert split_host_port("[::1]:8443", 443) == ("::1", 8443)
    with pytest.raises(ValueError):
        split_host_port("h:0", 80)


def test_redaction():
    headers = [("Authorization", "Bearer sk-live"), ("Cookie", "a=b"), ("X-Api-Key", "k"),
               ("X-Auth-Token", "t"), ("X-Client-Secret", "s"), ("Proxy-Authorization", "Basic x"),
               ("Set-Cookie", "id=1"), ("Accept", "*/*"), ("Content-Type", "text/plain"), ("X-Dup", "1"), ("X-Dup", "2")]
    out = redact_headers(headers)
    for name in ("Authorization", "Cookie", "X-Api-Key", "X-Auth-Token", "X-Client-Secret", "Proxy-Authorization",
                 "Set-Cookie"):
        assert out[name] == REDACTED, name
    assert out["Accept"] == "*/*" and out["Content-Type"] == "text/plain" and out["X-Dup"] == "1, 2"
    assert redact_path("/v1/x?api_key=abc&page=2") == f"/v1/x?api_key={REDACTED.replace('[', '%5B').replace(']', '%5D')}&page=2"
    assert redact_path("/v1/x?page=2") == "/v1/x?page=2"
    assert redact_path("/plain") == "/plain"


def test_host_addresses_are_refused_even_when_globally_routable():
    policy = Policy(default="allow", host_addresses=["93.184.216.34", "2001:db8::1"])
    ok, why = policy.check_addresses("myhost.example", ["93.184.216.34"], 80)
    assert ok == [] and "93.184.216.34 is an address of the sandbox's host" in why
    ok, why = policy.check_addresses("myhost.example", ["::ffff:93.184.216.34", "1.1.1.1"], 80)
    assert ok == ["1.1.1.1"] and why is None


def test_link_local_and_metadata_refused_under_default_allow():
    policy = Policy(default="allow")
    for addr in ("169.254.169.254", "169.254.1.1", "fe80::1", "fe80::1%eth0"):
        ok, why = policy.check_addresses(addr, [addr], 80)
        assert ok == [] and "link-local" in why, addr


def test_literal_ip_in_allow_lifts_only_the_private_range_refusal_for_that_address():
    policy = Policy(allow=["10.1.2.3:8080"], host_addresses=["172.16.0.1"])
    assert policy.check_addresses("10.1.2.3", ["10.1.2.3"], 8080) == (["10.1.2.3"], None)
    ok, why = policy.check_addresses("10.1.2.3", ["10.1.2.3"], 9000)  # the entry pins port 8080
    assert ok == [] and "private" in why
    ok, why = Policy(allow=["metadata.test"]).check_addresses("metadata.test", ["169.254.169.254"], 80)
    assert ok == [] and "link-local" in why  # a name resolving there is not an explicit permission
    ok, why = Policy(allow=["127.0.0.1"]).check_addresses("127.0.0.1", ["127.0.0.1"], 80)
    assert ok == [] and "loopback" in why


@pytest.mark.parametrize("literal, refusal", [("169.254.169.254", "link-local"), ("172.16.0.1", "host"),
                                              ("[fe80::1]", "link-local")])
def test_a_literal_in_allow_never_opens_metadata_link_local_or_host_addresses(literal, refusal):
    address = literal.strip("[]")
    policy = Policy(allow=[literal], host_addresses=["172.16.0.1"])
    ok, why = policy.check_addresses(address, [address], 80)
    assert ok == [] and refusal in why


def test_a_service_name_answering_outside_the_sandbox_network_is_refused():
    policy = Policy(services=["db"], host_addresses=["172.16.0.1"], service_subnets=[ipaddress.ip_network("172.20.5.0/24")])
    assert [policy.service_address_refusal(a) is None for a in ("172.20.5.7", "172.16.0.1", "169.254.169.254", "8.8.8.8")] \
        == [True, False, False, False]


def test_a_tunnel_that_names_another_server_in_its_client_hello_is_refused():
    policy = Policy(allow=["allowed.test"])
    assert sni_refusal(policy, "allowed.test", 443, server_name(client_hello("forbidden.test"))) is not None


def test_a_tunnel_that_names_its_own_host_passes():
    policy = Policy(allow=["allowed.test"])
    assert sni_refusal(policy, "allowed.test", 443, server_name(client_hello("allowed.test"))) is None


def client_hello(name: str) -> bytes:
    """A real TLS ClientHello for `name`, from the ssl module."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname=name)
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_allow_private_still_reaches_host_addresses_for_tests():
    policy = Policy(allow=["x.test"], allow_private=True, host_addresses=["172.16.0.1"])
    assert policy.check_addresses("x.test", ["172.16.0.1"], 80) == (["172.16.0.1"], None)


def test_proxy_config_carries_host_addresses():
    policy = Policy.from_config({"default": "allow", "host_addresses": ["93.184.216.34"]})
    assert policy.check_addresses("h", ["93.184.216.34"], 80)[0] == []


def test_ipv6_literals_in_allow_keep_their_colons():
    policy = Policy(allow=["fd00::1", "[2001:db8::5]:8443"])
    assert policy.check_addresses("fd00::1", ["fd00::1"], 80) == (["fd00::1"], None)
    assert policy.decide("2001:db8::5", 8443).allowed and not policy.decide("2001:db8::5", 443).allowed
    assert Policy(allow=["10.0.0.5:8080"]).decide("10.0.0.5", 8080).allowed
