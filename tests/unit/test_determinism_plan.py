"""determinism.py and the pure parts of network.py: FAKETIME values, env plans, static address
blocks, egress policy composition with snapshot entries, proxy env, the audit tailer."""
from __future__ import annotations

import ipaddress
import json

import pytest

from daemon.sandbox import determinism as det
from daemon.sandbox.db_audit import needs_db_audit
from daemon.sandbox.network import (
    AuditTailer,
    egress_policy,
    needs_service_traffic,
    proxy_env,
    reaches_outside,
)
from daemon.spec import models as spec_models
from tests.support.images import PYTHON


def load(extra: dict):
    doc = {"version": 1, "id": "x", "base": PYTHON, "task": {"prompt": "p"},
           "invariants": {"ok": {"check": {"type": "file_exists", "path": "x"}}}, **extra}
    return spec_models.SpecDocument.model_validate(doc)


def test_faketime_values_are_utc():
    frozen = load({"determinism": {"clock": "2024-03-01T13:00:00+01:00"}}).determinism.clock
    assert det.faketime_value(frozen) == "2024-03-01 12:00:00"
    ticking = load({"determinism": {"clock": {"at": "2024-03-01T12:00:00Z", "mode": "ticking"}}}).determinism.clock
    assert det.faketime_value(ticking) == "@2024-03-01 12:00:00"


def test_plan_env_and_binds(monkeypatch, tmp_path):
    lib = tmp_path / "libfaketime.so.1"
    lib.write_bytes(b"")
    monkeypatch.setenv("SERVICE_FAKETIME_LIB", str(lib))
    d = load({"determinism": {"clock": "2024-01-01T00:00:00Z", "seed": 7, "dns": "static"}}).determinism
    plan = det.plan(d, "7", {"PYTHONPATH": "/agent/lib", "TZ": "Europe/Paris"})
    assert plan.env["LD_PRELOAD"] == det.CONTAINER_FAKETIME
    assert plan.env["FAKETIME"] == "2024-01-01 00:00:00" and plan.env["DONT_FAKE_MONOTONIC"] == "1"
    assert "TZ" not in plan.env  # the spec's TZ wins
    assert plan.env["PYTHONPATH"] == "/svc/site:/agent/lib"
    assert plan.env["PYTHONHASHSEED"] == str(det.hash_seed("7")) and plan.env["SVC_SEED_RANDOM"] == "1"
    assert plan.binds[str(lib)] == (det.CONTAINER_FAKETIME, "ro")
    assert plan.binds[str(det.SITE_DIR)] == (det.CONTAINER_SITE, "ro") and (det.SITE_DIR / "sitecustomize.py").exists()
    assert plan.static_dns
    assert det.plan(None, "7").env == {}
    seed_only = det.plan(load({"determinism": {"seed": "abc"}}).determinism, "abc")
    assert "LD_PRELOAD" not in seed_only.env and seed_only.env["PYTHONPATH"] == "/svc/site"
    monkeypatch.setenv("SERVICE_FAKETIME_LIB", str(tmp_path / "missing.so"))
    with pytest.raises(det.DeterminismUnavailable, match="libfaketime"):
        det.plan(d, "7")


def test_hash_seed_range_and_stability():
    assert det.hash_seed("a") == det.hash_seed("a") != det.hash_seed("b")
    assert 0 <= det.hash_seed("anything") < 2**32


def test_static_blocks_and_layout():
    pool = ipaddress.IPv4Network("10.213.0.0/16")
    blocks = list(det.candidate_subnets("seed-1", pool))
    assert len(blocks) == 1024 and len(set(blocks)) == 1024
    assert blocks[0] == next(det.candidate_subnets("seed-1", pool))  # stable
    assert all(b.prefixlen == 26 and b.subnet_of(pool) for b in blocks[:5])
    assert blocks[1].network_address == blocks[0].network_address + 64 or blocks[1] == pool.subnets(new_prefix=26).__next__()
    layout = det.static_layout(blocks[0], ["db", "mock"])
    base = blocks[0].network_address
    assert layout == {"agent": str(base + 2), "proxy": str(base + 3), "service:db": str(base + 10),
                      "service:mock": str(base + 11)}
    assert det.gateway(blocks[0]) == str(base + 1)


def test_egress_policy_with_snapshot_entries():
    none = load({})
    policy, dropped = egress_policy(none, {"api.openai.com": ["443"], "files.example.com": []})
    assert policy == {"default": "deny", "allow": ["api.openai.com:443", "files.example.com"]} and dropped == []
    assert reaches_outside(policy)
    listed = load({"network": {"egress": {"allow": ["*.example.com"]}}})
    policy, dropped = egress_policy(listed, {"api.openai.com": [443]})
    assert policy["allow"] == ["*.example.com", "api.openai.com:443"]
    explicit_empty = load({"network": {"egress": {"default": "deny", "allow": []}}})
    policy, dropped = egress_policy(explicit_empty, {"api.openai.com": ["443"]})
    assert policy == {"default": "deny", "allow": []} and dropped == ["api.openai.com:443"]
    assert not reaches_outside(policy)
    allow_all = load({"network": {"egress": {"default": "allow"}}})
    assert egress_policy(allow_all, {"x.com": []})[0] == {"default": "allow", "allow": []}
    assert egress_policy(None, None) == ({"default": "deny", "allow": []}, [])


def test_proxy_env_and_service_traffic():
    env = proxy_env(["db", "mock"], ["api.stripe.com"], through_proxy=False)
    assert env["HTTP_PROXY"] == env["https_proxy"] == env["ALL_PROXY"] == "http://svc-proxy:3128"
    assert env["NO_PROXY"] == "localhost,127.0.0.1,::1,sandbox,db,mock,api.stripe.com"
    assert proxy_env(["db"], [], through_proxy=True)["no_proxy"] == "localhost,127.0.0.1,::1"
    assert not needs_service_traffic(load({}))
    assert needs_service_traffic(load({"audit": {"http_calls": True}}))
    assert needs_service_traffic(load({"forbidden": {"http_except": []}}))
    assert not needs_db_audit(load({})) and not needs_db_audit(None)
    assert needs_db_audit(load({"audit": {"db_writes": True}}))
    assert needs_db_audit(load({"forbidden": {"db_writes_outside": ["orders"]}}))


def test_audit_tailer_reads_complete_lines_only(tmp_path):
    got = []
    tailer = AuditTailer(tmp_path, lambda t, d, ts: got.append((t, d, ts)))
    path = tmp_path / "egress.jsonl"
    line = json.dumps({"ts": "2024-01-01T00:00:00.000Z", "type": "http_call", "details": {"host": "a"}})
    path.write_text(line + "\n" + line[:10])
    assert tailer.poll() == 1
    with path.open("a") as fh:
        fh.write(line[10:] + "\n" + "not json\n")
    assert tailer.poll() == 1
    assert got == [("http_call", {"host": "a"}, "2024-01-01T00:00:00.000Z")] * 2
    assert tailer.poll() == 0
