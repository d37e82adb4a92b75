"""Determinism (spec `determinism: {clock, seed, dns}`): what a sandbox needs so that two sandboxes
booted from the same spec and seed print the same bytes for the time, random numbers and the
addresses of their names.

* `clock` -> libfaketime for the agent container: the host's `libfaketime.so.1` is bind-mounted
  read-only at `/svc/faketime/` and preloaded (`LD_PRELOAD`) with `FAKETIME="YYYY-MM-DD hh:mm:ss"`
  (frozen) or `"@YYYY-MM-DD hh:mm:ss"` (starts there and ticks; each process starts at that
  instant), in UTC (`TZ=UTC` unless the spec sets TZ). The container environment (a sandbox from
  the warm pool: every exec's environment, bound when a run claims it) reaches every process: the
  agent and its children, `/commands`, setup commands and command checks. The binds are the
  sandbox's shape; the values (`plan(...).env`) are the run's and are added after every boot
  extension (boot.py `determinism_env`).
  Only the wall clock is faked (`DONT_FAKE_MONOTONIC=1`): a frozen monotonic clock hangs every
  event loop and timeout. Python >= 3.11's `time.sleep` trips over a libfaketime 0.9.10 bug in
  that mode; the svc `sitecustomize` (below) replaces it. Statically linked programs (Go) do not
  load libfaketime and see the real time; so do file modification times.
* `seed` -> `SERVICE_SEED` (the sandbox's seed: a spec's `determinism.seed` is the default seed of
  its sandboxes, a request's `seed` wins), `PYTHONHASHSEED` derived from it, and Python's global
  `random` seeded from it by `daemon/sandbox/programs/site/sitecustomize.py` on `PYTHONPATH`
  (`/svc/site`).
* `dns: static` -> the sandbox network gets a subnet derived from the seed (from the pool
  `SERVICE_STATIC_DNS_POOL`, default 10.213.0.0/16, in /26 blocks) and every container a fixed
  address in it (agent .2, egress proxy .3, services .10 + their index in the spec, database
  proxies .40 + index); the agent's `/etc/hosts` pins every sandbox name (`extra_hosts`). Two live
  sandboxes cannot share a subnet: when the seed's block is taken (the same seed booted twice at
  once, or another seed hashing to the same block) the next free block is used and a `warning`
  audit event says so.
"""
from __future__ import annotations

import hashlib
import ipaddress
import os
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from daemon.spec.blocks import Clock, Determinism

PROGRAMS_DIR = Path(__file__).resolve().parent / "programs"
SITE_DIR = PROGRAMS_DIR / "site"
CONTAINER_SITE = "/svc/site"
CONTAINER_FAKETIME = "/svc/faketime/libfaketime.so.1"
FAKETIME_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib64/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
DEFAULT_POOL = "10.213.0.0/16"
BLOCK_PREFIX = 26

AGENT_HOST = 2
PROXY_HOST = 3
SERVICE_BASE = 10


def host_faketime() -> str | None:
    """The daemon host's libfaketime (`SERVICE_FAKETIME_LIB` overrides the search)."""
    override = os.environ.get("SERVICE_FAKETIME_LIB")
    if override:
        return override if os.path.exists(override) else None
    for path in FAKETIME_CANDIDATES:
        if os.path.exists(path):
            return path
    return None


def faketime_value(clock: Clock) -> str:
    """`FAKETIME` for a spec `Clock` (`at` aware datetime, `mode` frozen | ticking), in UTC."""
    at = clock.at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return at if clock.mode == "frozen" else "@" + at


def hash_seed(seed: str) -> int:
    """PYTHONHASHSEED (0..4294967295) derived from the sandbox seed."""
    return int(hashlib.sha256(f"{seed}\x00pythonhashseed".encode()).hexdigest()[:8], 16)


@dataclass
class DeterminismPlan:
    env: dict[str, str] = field(default_factory=dict)
    binds: dict[str, tuple[str, str]] = field(default_factory=dict)
    static_dns: bool = False


class DeterminismUnavailable(Exception):
    pass


def plan(determinism: Determinism, seed: str, base_env: dict[str, str] | None = None) -> DeterminismPlan:
    """Env and binds for the agent container. `base_env` is the environment it already has (the
    spec's agent.env wins for TZ; PYTHONPATH is prepended to)."""
    base_env = base_env or {}
    out = DeterminismPlan()
    if determinism is None:
        return out
    uses_site = False
    if determinism.clock is not None:
        lib = host_faketime()
        if lib is None:
            raise DeterminismUnavailable(
                "determinism.clock needs libfaketime on the daemon's host (Debian/Ubuntu: `apt-get install "
                "libfaketime`; or point SERVICE_FAKETIME_LIB at libfaketime.so.1)")
        out.binds[lib] = (CONTAINER_FAKETIME, "ro")
        preload = base_env.get("LD_PRELOAD")
        out.env.update({
            "LD_PRELOAD": CONTAINER_FAKETIME + (f":{preload}" if preload else ""),
            "FAKETIME": faketime_value(determinism.clock),
            "DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "SVC_FAKETIME_SLEEP": "1",
        })
        if "TZ" not in base_env:
            out.env["TZ"] = "UTC"
        uses_site = True
    if determinism.seed is not None:
        out.env["PYTHONHASHSEED"] = str(hash_seed(seed))
        out.env["SVC_SEED_RANDOM"] = "1"
        uses_site = True
    if uses_site:
        out.binds[str(SITE_DIR)] = (CONTAINER_SITE, "ro")
        existing = base_env.get("PYTHONPATH")
        out.env["PYTHONPATH"] = CONTAINER_SITE + (f":{existing}" if existing else "")
    out.static_dns = determinism.dns == "static"
    return out


# --- static DNS ----------------------------------------------------------------------------------


def pool() -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(os.environ.get("SERVICE_STATIC_DNS_POOL") or DEFAULT_POOL)


def candidate_subnets(seed: str, net_pool: ipaddress.IPv4Network | None = None,
                      prefix: int = BLOCK_PREFIX) -> Iterator[ipaddress.IPv4Network]:
    """The seed's /26 block first, then the following ones (wrapping around the pool)."""
    net_pool = net_pool or pool()
    blocks = 2 ** (prefix - net_pool.prefixlen)
    start = int(hashlib.sha256(f"{seed}\x00static-dns".encode()).hexdigest()[:12], 16) % blocks
    size = 2 ** (32 - prefix)
    base = int(net_pool.network_address)
    for i in range(blocks):
        index = (start + i) % blocks
        yield ipaddress.IPv4Network((base + index * size, prefix))


def gateway(subnet: ipaddress.IPv4Network) -> str:
    return str(subnet.network_address + 1)


def address(subnet: ipaddress.IPv4Network, host: int) -> str:
    if not 1 < host < subnet.num_addresses - 1:
        raise ValueError(f"host {host} does not fit in {subnet}")
    return str(subnet.network_address + host)


def static_layout(subnet: ipaddress.IPv4Network, services: list[str]) -> dict[str, str]:
    """Container role -> address: "agent", "proxy", "service:<name>"."""
    layout = {"agent": address(subnet, AGENT_HOST), "proxy": address(subnet, PROXY_HOST)}
    for i, name in enumerate(services):
        layout[f"service:{name}"] = address(subnet, SERVICE_BASE + i)
    return layout
