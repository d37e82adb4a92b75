"""Network policy, audit capture and determinism of a sandbox: the `SandboxPolicyExtension` boot
extension (DESIGN.md "Sandboxes").

Layout of one sandbox:

    svc-<id>            internal network (no route out): agent, services, proxies
    svc-<id>-egress     a second network with a route out, only when the egress policy allows
                        some outside host or `ingress.allow` has entries; only the proxy joins it
    svc-<id>-proxy      egress/audit proxy (programs/egress_proxy.py), alias `svc-proxy`, port 3128;
                        only when something must pass through it (`needs_egress_proxy`)

Database writes (`audit.db_writes` or `forbidden.db_writes_outside`) are audited inside each
postgres server, with no proxy in front of it: `db_audit.py`.

How each policy is enforced:

* egress: the agent container is only on the internal network, so nothing it runs (proxy-aware
  or raw sockets) has a route out. Without an egress proxy (nothing allowed outside, no ingress,
  no HTTP audit) that is all there is. With one, its `HTTP_PROXY`/`HTTPS_PROXY` (both cases, plus
  `ALL_PROXY`) point at the proxy, which applies `network.egress` (plus compatible snapshot `auth.egress`
  entries), refuses non-global addresses and the host's own addresses (`host_addresses()`)
  unless they are the sandbox's own services, a literal IP in `allow`, or the daemon runs with
  `SERVICE_EGRESS_ALLOW_PRIVATE=1` (meant for tests), and writes a `warning` audit event for
  every refusal. Nothing on the internal network can connect to the host itself either: the
  manager installs host firewall rules on its bridge (`firewall.py`). `NO_PROXY` lists
  localhost, and also the sandbox's own names when neither `audit.http_calls` nor
  `forbidden.http_except` needs to see service traffic.
* snapshot `auth.egress` entries (host -> ports) are added to `allow` as `host:port` unless the
  spec explicitly says `allow: []` under `default: deny` (then a `warning` names what was dropped).
* ingress: `ingress.allow` `{from: host, to_port}` -> the proxy forwards a port of its own to
  `sandbox:<to_port>`, published on 127.0.0.1 only (an ephemeral host port, reported in a
  `status` event `{step: "ingress", ports: [...]}` and by `ingress_ports(sb)`). Nothing else is
  published.
* dns_overrides: the real hostname becomes a network alias of the service it maps to (DNS on
  the sandbox network answers with the service), and the proxy maps the name to the service.
* audit: the egress proxy appends JSON lines to `<runtime dir>/audit-in/*.jsonl` (bind-mounted, not
  visible to the agent); `audit.AuditTailer` feeds them to the sandbox's `AuditLog` (which stamps the
  sandbox id, redacts secret values, appends to the daemon-only evidence file and to the
  convenience copy /workspace/.svc/audit.jsonl, and publishes on the lifecycle stream); the
  postgres services' `db_audit.DbAuditReader`s, started by `on_services`, record `db_write` events
  the same way. `audit.file_system` -> `fswatch.WorkspaceWatcher`, started when the sandbox
  is ready (setup and fixtures are not reported).
* determinism: see `determinism.py`; `dns: static` also fixes every container's address here.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.sandbox import db_audit
from daemon.sandbox import determinism as det
from daemon.sandbox.db_audit import needs_db_audit, server_command
from daemon.sandbox.audit import AuditTailer
from daemon.sandbox.boot import BootExtension, BootHost
from daemon.sandbox.engine import ContainerInfo, ContainerSpec
from daemon.sandbox.fswatch import WorkspaceWatcher
from daemon.sandbox.models import BootFailure
from daemon.sandbox.runtime import SandboxRuntime
from daemon.sandbox.services import PROGRAMS_DIR, PYTHON_IMAGE, ServicePlan

if TYPE_CHECKING:
    from daemon.config import Settings
    from daemon.spec.models import SpecDocument

log = logging.getLogger("svcd.sandbox.network")

PROXY_ALIAS = "svc-proxy"
PROXY_PORT = 3128
INGRESS_BASE_PORT = 20000
PROXY_READY_S = 30.0
STATE = "policy"  # key in sb.extension_state


EGRESS_AUDIT_CAP = 64 * 1024 * 1024


def egress_audit_cap() -> int:
    """Bytes of egress audit one sandbox may write on the host (SERVICE_EGRESS_AUDIT_CAP); past it
    the proxy refuses every request."""
    try:
        return max(4096, int(os.environ.get("SERVICE_EGRESS_AUDIT_CAP") or EGRESS_AUDIT_CAP))
    except ValueError:
        return EGRESS_AUDIT_CAP


def allow_private(settings: Settings | None) -> bool:
    value = getattr(settings, "egress_allow_private", None)
    if value is not None:
        return bool(value)
    return os.environ.get("SERVICE_EGRESS_ALLOW_PRIVATE", "").lower() in ("1", "true", "yes", "on")


def host_addresses() -> list[str]:
    """This host's own addresses (docker0, every bridge's gateway, eth0...): the egress proxy
    refuses them. Read from /proc (IPv4 `/32 host LOCAL` entries of the fib trie, IPv6
    if_inet6); empty where /proc does not have them."""
    found: set[str] = set()
    try:
        with open("/proc/net/fib_trie") as fh:
            previous = ""
            for line in fh:
                text = line.strip()
                if text.startswith("/32 host LOCAL") and previous.startswith("|-- "):
                    found.add(previous[4:])
                previous = text
    except OSError:
        pass
    try:
        with open("/proc/net/if_inet6") as fh:
            for line in fh:
                raw = line.split()[0] if line.split() else ""
                if len(raw) == 32:
                    found.add(str(ipaddress.IPv6Address(bytes.fromhex(raw))))
    except (OSError, ValueError):
        pass
    return sorted(found)


# --- policy (pure) -------------------------------------------------------------------------------


def egress_policy(spec: SpecDocument | None, snapshot_egress: dict[str, list[str]] | None) -> tuple[dict[str, Any], list[str]]:
    """({default, allow}, dropped snapshot entries) for the egress proxy."""
    egress = spec.network.egress if spec is not None else None
    default = egress.default if egress is not None else "deny"
    allow = list(egress.allow) if egress is not None else []
    dropped: list[str] = []
    entries: list[str] = []
    for host, ports in (snapshot_egress or {}).items():
        host = str(host).strip().lower()
        if not host:
            continue
        if ports:
            entries.extend(f"{host}:{int(str(p).strip())}" for p in ports)
        else:
            entries.append(host)
    explicit_empty = (egress is not None and default == "deny" and not allow and "allow" in egress.model_fields_set)
    if entries:
        if explicit_empty:
            dropped = entries
        elif default == "deny":
            allow.extend(e for e in entries if e not in allow)
    return {"default": default, "allow": allow}, dropped


def reaches_outside(policy: dict[str, Any]) -> bool:
    return policy["default"] == "allow" or bool(policy["allow"])


def needs_service_traffic(spec: SpecDocument | None) -> bool:
    """Whether HTTP to the sandbox's own services must go through the proxy."""
    if spec is None:
        return False
    from daemon.spec.checks import sees_effects

    return bool(spec.audit.http_calls) or spec.forbidden.sees_http_calls() or sees_effects(spec.invariants, "http")


def needs_egress_proxy(policy: dict[str, Any], ingress: list[Any], http_through: bool) -> bool:
    """Whether the sandbox gets the egress/audit proxy container: something outside is allowed,
    ingress forwards a port, or HTTP must be seen (audit.http_calls, forbidden.http_except).
    Without it nothing the agent runs has a route anywhere but its own services."""
    return reaches_outside(policy) or bool(ingress) or http_through


def proxy_env(service_names: list[str], override_hosts: list[str], through_proxy: bool) -> dict[str, str]:
    url = f"http://{PROXY_ALIAS}:{PROXY_PORT}"
    no_proxy = ["localhost", "127.0.0.1", "::1"]
    if not through_proxy:
        no_proxy += ["sandbox", *service_names, *override_hosts]
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = url
        env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = ",".join(dict.fromkeys(no_proxy))
    return env


# --- the boot extension --------------------------------------------------------------------------


class SandboxPolicyExtension(BootExtension):
    """Wires network policy, audit capture and determinism into the boot pipeline."""

    def __init__(self, settings: Settings | None = None):
        self.settings = settings

    # state kept per sandbox in sb.extension_state[STATE]
    @staticmethod
    def _state(sb: SandboxRuntime) -> dict[str, Any]:
        state: dict[str, Any] = sb.extension_state.setdefault(STATE, {})
        return state

    # 1. the network itself (static subnet for dns: static)
    async def create_network(self, manager: BootHost, sb: SandboxRuntime) -> bool:
        spec = sb.spec
        determinism = spec.determinism if spec is not None else None
        if determinism is None or determinism.dns != "static":
            return False
        state = self._state(sb)
        first = None
        last_error: Exception | None = None
        for attempt, subnet in enumerate(det.candidate_subnets(sb.seed)):
            if attempt >= 64:
                break
            first = first or subnet
            assert sb.network is not None, "the boot names the network first"
            try:
                await manager.driver.create_network(sb.network, manager.labels(sb, role="network"), internal=True,
                                                    subnet=str(subnet), gateway=det.gateway(subnet))
            except Exception as exc:  # overlaps a live network: try the next block
                last_error = exc
                if "overlap" not in str(exc).lower() and "in use" not in str(exc).lower():
                    raise
                continue
            state["subnet"] = subnet
            if subnet != first:
                state["subnet_moved"] = (str(first), str(subnet))
            return True
        raise BootFailure("network", f"determinism.dns static: no free address block in {det.pool()} "
                                     f"(SERVICE_STATIC_DNS_POOL): {last_error}")

    # 2. the egress proxy, agent environment, determinism
    async def on_network(self, manager: BootHost, sb: SandboxRuntime, agent: ContainerSpec) -> None:
        spec = sb.spec
        state = self._state(sb)
        audit_dir = sb.runtime_dir / "audit-in"
        audit_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(audit_dir, 0o777)
        state["audit_dir"] = audit_dir

        services = [p.name for p in sb.plans]
        overrides = dict(spec.network.dns_overrides) if spec is not None else {}
        state["overrides"] = overrides

        # static addresses
        subnet = state.get("subnet")
        layout: dict[str, str] = {}
        if subnet is not None:
            layout = det.static_layout(subnet, services)
            state["layout"] = layout
            agent.ipv4_address = layout["agent"]
            hosts = {"sandbox": layout["agent"]}
            for name in services:
                hosts[name] = layout[f"service:{name}"]
            for host, target in overrides.items():
                if target in hosts:
                    hosts[host] = hosts[target]
            agent.extra_hosts = {**agent.extra_hosts, **hosts}

        # egress policy: the proxy only exists when something must go through it
        policy, dropped = egress_policy(spec, sb.snapshot_egress)
        ingress = list(spec.network.ingress.allow) if spec is not None else []
        http_through = needs_service_traffic(spec)
        with_proxy = needs_egress_proxy(policy, ingress, http_through)
        if with_proxy:
            if layout:
                agent.extra_hosts = {**agent.extra_hosts, PROXY_ALIAS: layout["proxy"]}
            # nothing else waits for the proxy to listen: it starts alongside the agent and services
            manager.start_alongside(sb, self._egress_proxy(manager, sb, policy, ingress, http_through, layout, audit_dir))

        # agent environment
        if with_proxy:
            agent.env.update(proxy_env(services, list(overrides), http_through))
        if spec is not None and spec.determinism is not None:
            # the binds are the shape's (a pooled container has them); the seed- and clock-derived
            # environment is the run's: boot.prepare_agent / bind_run add it after every extension
            try:
                plan = det.plan(spec.determinism, sb.seed, agent.env)
            except det.DeterminismUnavailable as exc:
                raise BootFailure("determinism", str(exc))
            agent.binds = {**agent.binds, **plan.binds}

        # audit events from the egress proxy, its only writer (the databases' come from on_services)
        audit = sb.audit
        assert audit is not None, "the manager gives every sandbox its audit log before boot"
        if with_proxy:
            tailer = AuditTailer(audit_dir, lambda type_, details, ts: audit.record(type_, details, ts=ts))
            tailer.start()
            state["tailer"] = tailer
        if dropped and sb.audit is not None:
            sb.audit.record("warning", {
                "kind": "snapshot_egress_dropped", "hosts": dropped,
                "message": "the agent snapshot's auth.egress entries were not added: the spec's network.egress "
                           "allows no outside host (allow: [])"})
        if state.get("subnet_moved") and sb.audit is not None:
            wanted_block, used = state["subnet_moved"]
            sb.audit.record("warning", {
                "kind": "static_dns_block_moved", "wanted": wanted_block, "used": used,
                "message": f"determinism.dns static: the seed's address block {wanted_block} is used by another "
                           f"live sandbox; this one uses {used}, so its addresses differ"})

    async def _egress_proxy(self, manager: BootHost, sb: SandboxRuntime, policy: dict[str, Any], ingress: list[Any], http_through: bool,
                            layout: dict[str, str], audit_dir: Path) -> None:
        """The egress/audit proxy (with its outside network when something outside is reachable),
        listening; then the ingress ports it publishes."""
        state = self._state(sb)
        outer = None
        if reaches_outside(policy) or ingress:
            outer = f"svc-{sb.id}-egress"
            state["outer_network"] = outer  # before creating it: a cancelled boot still removes it
            await manager.driver.create_network(outer, manager.labels(sb, role="network"), internal=False)
            if manager.firewall.enabled and not allow_private(self.settings or manager.settings):
                # The proxy refuses the host's addresses itself; the host's firewall refuses them
                # too, so a proxy bug is not a way in (released with the sandbox's other rules).
                await manager.firewall.protect(await manager.driver.network_bridge(outer), sb.id, manager.daemon_id)
        forwards = [{"listen": INGRESS_BASE_PORT + i, "to": f"sandbox:{rule.to_port}"} for i, rule in enumerate(ingress)]
        config = {
            "listen": f"0.0.0.0:{PROXY_PORT}", **policy, "services": [p.name for p in sb.plans],
            "dns_overrides": state.get("overrides") or {}, "allow_private": allow_private(self.settings or manager.settings),
            "host_addresses": await asyncio.to_thread(host_addresses),
            "http_calls": http_through, "audit_file": "/svc-audit/egress.jsonl", "forwards": forwards,
            "audit_cap": egress_audit_cap(),
        }
        proxy_spec = ContainerSpec(
            name=f"svc-{sb.id}-proxy", image=PYTHON_IMAGE, command=["python3", "-u", "/svc-programs/egress_proxy.py"],
            env={"SVC_EGRESS_CONFIG": json.dumps(config, separators=(",", ":"))},
            labels={"svc.role": "proxy"}, network=sb.network, aliases=[PROXY_ALIAS], init=True,
            binds={str(PROGRAMS_DIR): ("/svc-programs", "ro"), str(audit_dir): ("/svc-audit", "rw")},
            hostname="svc-proxy", ipv4_address=layout.get("proxy"), nano_cpus=int(1e9), mem_limit=256 * 1024**2,
            pids_limit=256, extra_networks={outer: []} if outer else {},
            ports={INGRESS_BASE_PORT + i: ("127.0.0.1", None) for i in range(len(ingress))},
        )
        info = await self._start_proxy(manager, sb, proxy_spec, PROXY_PORT)
        state["proxy"] = info
        if ingress:
            ports = await self._ingress_ports(manager, info.id, ingress)
            state["ingress"] = ports
            manager.status(sb, step="ingress", ports=ports)

    async def _start_proxy(self, manager: BootHost, sb: SandboxRuntime, spec: ContainerSpec, port: int) -> ContainerInfo:
        info = await manager.run_aux_container(sb, spec, inspect=True)
        deadline = time.monotonic() + PROXY_READY_S
        while True:
            ports = manager.driver.listening_ports(info.pid) if info.pid else None
            if ports is not None and port in ports:
                return info
            if ports is None:  # /proc not readable: ask the container
                raw = await manager.driver.exec(info.id, ["sh", "-c", f"nc -z 127.0.0.1 {port}"], watchdog_s=5)
                if raw.exit_code == 0:
                    return info
            state = await manager.driver.container_state(info.id)
            if state is None or not state.get("Running") or time.monotonic() > deadline:
                logs = (await manager.driver.logs(info.id, tail=20)).strip()
                raise BootFailure("network", f"{spec.name} did not start listening on port {port}"
                                             + (f"; last log lines:\n{logs}" if logs else ""))
            await asyncio.sleep(0.05)

    async def _ingress_ports(self, manager: BootHost, container_id: str, ingress: list[Any]) -> list[dict[str, Any]]:
        published = await manager.driver.published_ports(container_id)
        out = []
        for i, rule in enumerate(ingress):
            host = published.get(INGRESS_BASE_PORT + i)
            out.append({"to_port": rule.to_port, "host": host[0] if host else None, "host_port": host[1] if host else None})
        return out

    # 3. each service container: logical decoding for the db audit, override aliases, fixed address
    async def on_service(self, manager: BootHost, sb: SandboxRuntime, plan: ServicePlan, spec: ContainerSpec) -> None:
        state = self._state(sb)
        overrides = state.get("overrides") or {}
        if plan.type == "postgres" and needs_db_audit(sb.spec):
            spec.command = server_command(spec.command)
        spec.aliases = list(dict.fromkeys([*spec.aliases, *(h for h, t in overrides.items() if t == plan.name)]))
        layout = state.get("layout")
        if layout:
            spec.ipv4_address = layout.get(f"service:{plan.name}")

    # 4. services up and the run bound: the db audit's role, guard and slot, then its readers
    async def on_services(self, manager: BootHost, sb: SandboxRuntime) -> None:
        if not needs_db_audit(sb.spec):
            return
        readers = sb.db_readers
        for plan in sb.plans:
            if plan.type != "postgres":
                continue
            container = sb.services[plan.name].id
            user, database = plan.user or "postgres", plan.database or "postgres"
            await db_audit.prepare(manager.driver, container, plan.name, user, database, plan.agent_password or "")
            plan.check_user = db_audit.CHECK_ROLE
            audit = sb.audit
            assert audit is not None, "the manager gives every sandbox its audit log before boot"
            reader = db_audit.DbAuditReader(manager.driver, container, plan.name, user, database,
                                            lambda type_, details, ts: audit.record(type_, details, ts=ts))
            reader.start()
            readers.append(reader)

    # 5. ready: watch the workspace
    async def on_ready(self, manager: BootHost, sb: SandboxRuntime) -> None:
        spec = sb.spec
        fs = spec.audit.file_system if spec is not None else None
        if fs is None or sb.audit is None:
            return
        audit = sb.audit

        def emit(details: dict[str, Any]) -> None:
            audit.record("file_write", details)

        def warn(details: dict[str, Any]) -> None:
            audit.record("warning", details)

        watcher = WorkspaceWatcher(sb.workspace, fs.watch, fs.track, emit=emit, warn=warn, incomplete=audit.mark_incomplete)
        watcher.start()
        self._state(sb)["watcher"] = watcher

    # 6. teardown
    async def on_destroy(self, manager: BootHost, sb: SandboxRuntime) -> None:
        state = sb.extension_state.get(STATE) or {}
        watcher = state.pop("watcher", None)
        if watcher is not None:
            watcher.stop()
        readers, sb.db_readers = sb.db_readers, []
        for reader in readers:
            await reader.stop()
        tailer = state.pop("tailer", None)
        if tailer is not None:
            await tailer.stop()
        outer = state.pop("outer_network", None)
        if outer:
            proxy = state.get("proxy")
            if proxy is not None:
                try:
                    await manager.driver.remove_container(proxy.id)
                except Exception as exc:
                    log.warning("removing the proxy of %s failed: %s", sb.id, exc)
            try:
                await manager.driver.remove_network(outer)
            except Exception as exc:
                log.warning("removing network %s failed: %s", outer, exc)


async def flush_audit(sb: SandboxRuntime) -> None:
    """Record now whatever the proxies, the databases and the file watcher have reported so far
    (instead of waiting for their next poll), e.g. right after the agent exits."""
    state = sb.extension_state.get(STATE) or {}
    watcher = state.get("watcher")
    if watcher is not None:
        watcher.drain()
    tailer = state.get("tailer")
    if tailer is not None:
        tailer.poll()
    for reader in list(sb.db_readers):
        await reader.poll()


def ingress_ports(sb: SandboxRuntime) -> list[dict[str, Any]]:
    return list((sb.extension_state.get(STATE) or {}).get("ingress") or [])

