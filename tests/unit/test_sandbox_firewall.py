"""The host firewall of sandbox networks without touching the real firewall: how rules are read
back, how settings select it, and that every failure of the iptables command surfaces as a
FirewallError naming it (the real rules are exercised in tests/docker/test_host_isolation.py)."""
from __future__ import annotations

import pytest

from daemon.config import Settings
from daemon.sandbox.firewall import FirewallError, SandboxFirewall, parse_rule

V4 = ('-A SVC-SANDBOX -i br-de8e8cae8db1 -m conntrack ! --ctstate RELATED,ESTABLISHED -m comment --comment '
      '"svc-sandbox=sb-c3388fd5e09c24d6 daemon=dmn_9eb84461026e" -j REJECT --reject-with icmp-port-unreachable')
V6_NDP = ('-A SVC-SANDBOX -i br-de8e8cae8db1 -p ipv6-icmp -m icmp6 --icmpv6-type 135 -m comment --comment '
          '"svc-sandbox=sb-c3388fd5e09c24d6 daemon=dmn_9eb84461026e" -j RETURN')


def test_rules_read_back_name_sandbox_daemon_and_bridge():
    for line in (V4, V6_NDP):
        rule = parse_rule(line)
        assert rule == {"sandbox": "sb-c3388fd5e09c24d6", "daemon": "dmn_9eb84461026e", "iface": "br-de8e8cae8db1",
                        "spec": line}
    assert parse_rule("-N SVC-SANDBOX") is None
    assert parse_rule("-A INPUT -j SVC-SANDBOX") is None
    assert parse_rule('-A SVC-SANDBOX -i br-x -m comment --comment "someone else" -j DROP') is None


def test_settings_switch_and_binaries(monkeypatch):
    monkeypatch.setenv("SERVICE_SANDBOX_FIREWALL", "off")
    monkeypatch.setenv("SERVICE_IPTABLES", "/opt/x/iptables-legacy")
    settings = Settings.from_env()
    assert settings.sandbox_firewall is False
    firewall = SandboxFirewall.from_settings(settings)
    assert not firewall.enabled and firewall.iptables == "/opt/x/iptables-legacy"
    assert firewall.ip6tables == "/opt/x/ip6tables-legacy"
    monkeypatch.delenv("SERVICE_SANDBOX_FIREWALL")
    assert Settings.from_env().sandbox_firewall is True and Settings().sandbox_firewall is True
    monkeypatch.setenv("SERVICE_SANDBOX_FIREWALL", "disabled")
    with pytest.raises(SystemExit, match="SERVICE_SANDBOX_FIREWALL"):
        Settings.from_env()


def fake_iptables(tmp_path, body: str) -> str:
    path = tmp_path / "iptables"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


async def test_missing_binary_fails_naming_it(tmp_path):
    firewall = SandboxFirewall(iptables=str(tmp_path / "nope" / "iptables"))
    with pytest.raises(FirewallError, match="cannot run .*nope/iptables"):
        await firewall.protect("lo", "sb-x", "dmn_x")


async def test_a_failing_command_fails_with_its_output(tmp_path):
    firewall = SandboxFirewall(iptables=fake_iptables(tmp_path, "echo 'Permission denied (you must be root)' >&2; exit 4"))
    with pytest.raises(FirewallError, match=r"iptables .*failed.*you must be root"):
        await firewall.protect("lo", "sb-x", "dmn_x")


async def test_a_hanging_command_times_out(tmp_path):
    firewall = SandboxFirewall(iptables=fake_iptables(tmp_path, "exec sleep 30"), timeout_s=0.3)
    with pytest.raises(FirewallError, match="did not finish within 0.3s"):
        await firewall.protect("lo", "sb-x", "dmn_x")


async def test_unknown_bridge_fails_before_any_command(tmp_path):
    firewall = SandboxFirewall(iptables=fake_iptables(tmp_path, "exit 0"))
    with pytest.raises(FirewallError, match="br-doesnotexist not found"):
        await firewall.protect("br-doesnotexist", "sb-x", "dmn_x")


async def test_a_rule_installed_during_a_sweep_is_kept(tmp_path):
    """The sweep asks what owns a rule after listing the rules: a sandbox (or pooled network) that
    got its rule while the sweep was removing engine objects is not in the sweep's first snapshot,
    yet its rule stays. With the snapshot alone it would be removed and the sandbox left open."""
    rules = tmp_path / "rules"
    rules.write_text('-A SVC-SANDBOX -i lo -m comment --comment "svc-sandbox=svc-net-new daemon=dmn_x" -j REJECT\n')
    deleted = tmp_path / "deleted"
    script = (f'case "$3" in -S) cat {rules} ;; -D) echo "$@" >> {deleted} ;; esac; exit 0')
    firewall = SandboxFirewall(iptables=fake_iptables(tmp_path, script))
    snapshot: set[str] = set()  # taken before the network was taken from the pool
    registered = {"svc-net-new"}  # what owns rules once they are listed
    kept = await firewall.reap("dmn_x", lambda: snapshot | registered)
    removed = await firewall.reap("dmn_x", snapshot)
    assert (kept, removed) == (0, 1)
