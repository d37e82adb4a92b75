"""`SandboxManager`: creates, boots, runs commands in, watches and destroys sandboxes.

It lives at `app["sandboxes"]` (created by `daemon.api.sandboxes.setup`). Other parts of the daemon
(runs, scoring, replicas, the egress/audit proxies) use it through these methods:

    create(tenant_id, *, spec=None, spec_id=None, spec_version=None, image=None, services=None,
           seed=None, timeout_s=None, metadata=None, secrets=None, agent_bundle=None, extra_env=None,
           shape="B", wait=True, required_env=None) -> dict
        A new sandbox; returns its body (both vocabularies: `status` and `state`). With wait=True
        it returns once boot finished (ready or failed); with wait=False at once (`creating`).
        Raises AtCapacity (503) when the tenant already has `settings.max_sandboxes` live ones,
        InvalidRequest for an unusable request. Boot failures do not raise: the body says
        `state: error` with `error: {step, message}`.
    get(sandbox_id) -> dict | None
    exec(sandbox_id, command, *, timeout_s=None, env=None, workdir="/workspace", background=False,
         user=None, record=True) -> ExecResult
        Runs `command` (a string goes through `sh -c`) in the agent container, wrapped in
        `timeout -k 2 <N>` so a runaway command is killed. Waits for a boot in progress. Moves the
        sandbox ready -> running. Publishes a `command` event and (record=True) a `process_spawn`
        audit event. Secrets are in the command's environment.
    service_exec(sandbox_id, service, command, timeout_s=30) -> ExecResult
        Inside a backing service's container (e.g. psql in postgres).
    mock_requests(sandbox_id, service) -> list[dict]
        An http_mock's recorded requests: {method, path, query, headers, body, ts, status}.
    workspace_path(sandbox_id) -> Path        host directory bind-mounted at /workspace
    audit_log(sandbox_id) -> AuditLog         the sandbox's audit writer and its authoritative copy
                                              (`$SERVICE_HOME/sandbox-evidence/<id>`, no container
                                              mounts it; audit.py): `mark()`, `events(since)`
    workspace_limit(sandbox_id) -> dict|None  the `warning` details once the workspace hit its
                                              disk limit (resources.disk), after one more check
    state(sandbox_id) / diff(sandbox_id)      workspace manifest, and changes since boot
    write_file / read_file / delete_file      workspace files (paths as clients send them)
    set_timeout(sandbox_id, seconds) -> dict  remaining life from now
    destroy(sandbox_id, reason="deleted")     stops it and releases everything; idempotent
    service_plan(sandbox_id, service)         how a service was configured (user, database, port)
    secret_values(sandbox_id) -> dict         the resolved secrets (memory only; e.g. for
                                              `forbidden.secrets_in_logs`); never log them

Boot pipeline (each step published on the lifecycle stream `sandbox:<id>` as
`{"event_type": "status", "data": {...}}`): secrets resolved (count) -> images checked ->
workspace created (its own ext4 of `resources.disk` bytes, loop-mounted: `diskquota.py`, unless
SERVICE_WORKSPACE_QUOTA=off; `{step: workspace_created, disk_limit, enforced, ms}`) ->
network created (one `internal` network per sandbox, firewalled off from the host by
`firewall.py` unless SERVICE_SANDBOX_FIREWALL=off) -> boot extensions (`BootExtension`, e.g.
issue 4's egress proxy: it may start containers and set HTTP_PROXY in the agent env) -> agent
container started, in parallel with the services (each started and waited for) -> fixtures in
order -> snapshot `required_env` checked -> agent bundle extracted to /agent -> setup commands ->
workspace manifest -> ready. Any failure: state `error` with `error: {step, message}`, everything
torn down, then `destroyed` and the stream closes.

Every container and network carries the labels `svc.sandbox`, `svc.tenant`, `svc.daemon` (plus
`svc.role`, `svc.service`). On start the manager marks the rows of sandboxes it no longer runs as
stopped and removes everything labelled with its daemon id; on shutdown it destroys every live
sandbox.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets as pysecrets
import shutil
import tarfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from daemon import auth
from daemon.errors import AtCapacity, Conflict, InvalidRequest, NotFound
from daemon.sandbox import workspace as ws
from daemon.sandbox.audit import AuditLog, redact
from daemon.sandbox.driver import (
    ContainerInfo,
    ContainerSpec,
    DockerDriver,
    ImageUnavailable,
    RawExec,
    RuntimeUnavailable,
    SandboxDriver,
)
from daemon.sandbox.diskquota import WorkspaceDisks
from daemon.sandbox.diskquota import usage as disk_usage
from daemon.sandbox.firewall import FirewallError, SandboxFirewall
from daemon.sandbox.models import (
    DEFAULT_COMMAND_TIMEOUT_S,
    LIVE_STATES,
    BootFailure,
    ExecResult,
    Limits,
    command_text,
)
from daemon.sandbox.secrets import SecretError, resolve_secrets
from daemon.sandbox.services import ServicePlan, mock_requests_path, plan_services, wait_ready
from daemon.store import sandboxes as sandbox_store
from daemon.util import new_id, now_iso

log = logging.getLogger("svcd.sandbox")

AGENT_INIT = ["sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]
TIMEOUT_GRACE_S = 2
SIZE_CHECK_INTERVAL_S = 1.0
DISK_POLL_S = 0.25  # statvfs of an enforced workspace while the sandbox lives
TOPIC_RETENTION_S = 600.0
RETRY_AFTER_S = 5


def topic(sandbox_id: str) -> str:
    """The EventBus topic of a sandbox's lifecycle stream."""
    return f"sandbox:{sandbox_id}"


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class BootExtension(Protocol):
    """A hook into the boot pipeline (issue 4: egress proxy, db proxy, determinism). Register it
    with `manager.extensions.append(ext)`. Raising BootFailure from a hook fails the boot.

    Required:
      `on_network(manager, sb, agent)` runs after the sandbox network exists and before the agent
      container is created; it may start containers with `manager.run_aux_container(sb, spec)`
      and change `agent` (env such as HTTP_PROXY, binds, extra_hosts, ipv4_address).
      `on_destroy(manager, sb)` runs first during teardown (containers are still there).
    Optional (looked up with getattr):
      `create_network(manager, sb) -> bool` creates `sb.network` itself (e.g. with a fixed
      subnet) and returns True; False lets the manager create it.
      `on_service(manager, sb, plan, spec)` may change a service's ContainerSpec before it starts.
      `on_ready(manager, sb)` runs after the manifest is taken, just before the sandbox is ready."""

    async def on_network(self, manager: "SandboxManager", sb: "SandboxRuntime", agent: ContainerSpec) -> None: ...

    async def on_destroy(self, manager: "SandboxManager", sb: "SandboxRuntime") -> None: ...


@dataclass
class SandboxRuntime:
    """The in-memory side of a live sandbox (the row in SQLite is the durable side)."""

    id: str
    tenant_id: str
    shape: str
    seed: str
    image: str | None
    plans: list[ServicePlan]
    limits: Limits
    workspace: Path
    runtime_dir: Path
    created: float
    expires: float
    spec: Any = None
    spec_id: str | None = None
    spec_version: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    provided_secrets: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    required_env: list[str] = field(default_factory=list)
    snapshot_egress: dict[str, list[Any]] = field(default_factory=dict)  # agent snapshot auth.egress: host -> ports
    agent_bundle: Path | None = None
    fixture_files: dict[str, dict[str, Any]] | None = None  # {path: {digest, size, mode}} uploaded with the spec
    state: str = "creating"
    network: str | None = None
    agent: ContainerInfo | None = None
    agent_env: dict[str, str] = field(default_factory=dict)
    services: dict[str, ContainerInfo] = field(default_factory=dict)
    aux: list[ContainerInfo] = field(default_factory=list)
    manifest: list[dict[str, Any]] | None = None
    manifest_taken_at: str | None = None
    boot_task: asyncio.Task | None = None
    expiry_task: asyncio.Task | None = None
    destroy_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # set once stopped or failed and torn down
    audit: AuditLog | None = None
    oom_kills: int = 0
    size_checked: float = 0.0
    size_check_cost: float = 0.0
    size_check_pending: asyncio.Task | None = None
    limits_exceeded: list[str] = field(default_factory=list)
    extension_state: dict[str, Any] = field(default_factory=dict)
    disk_mounted: bool = False  # the workspace is its own size-limited filesystem (diskquota.py)
    disk_watch: asyncio.Task | None = None
    disk_exceeded: dict[str, Any] | None = None  # the `warning` details once the workspace hit its limit

    @property
    def labels(self) -> dict[str, str]:
        return {"svc.sandbox": self.id, "svc.tenant": self.tenant_id}

    def secret_values(self) -> list[str]:
        return list(self.secrets.values()) + list(self.provided_secrets.values())


class SandboxManager:
    def __init__(self, settings: Any, store: Any, events: Any, driver: SandboxDriver | None = None):
        self.settings = settings
        self.store = store
        self.events = events
        self.driver: SandboxDriver = driver or DockerDriver()
        self.daemon_id: str = settings.daemon_id
        self.extensions: list[BootExtension] = []
        self._live: dict[str, SandboxRuntime] = {}
        self._closing = False
        self._tasks: set[asyncio.Task] = set()
        self.firewall = SandboxFirewall.from_settings(settings)
        self.disks = WorkspaceDisks(settings)

    # --- daemon lifecycle --------------------------------------------------------------------

    async def start(self) -> dict[str, int]:
        """Mark sandboxes a previous run of this daemon left behind as stopped, then remove every
        container and network labelled with this daemon's id (none of them is live yet), and the
        host firewall rules of sandboxes that are gone."""
        if not self.firewall.enabled:
            log.warning("host firewall of sandboxes is off (SERVICE_SANDBOX_FIREWALL=off): containers in sandboxes "
                        "can connect to any service listening on this host's addresses")
        if not self.disks.enabled:
            log.warning("workspace disk limits are not enforced (SERVICE_WORKSPACE_QUOTA=off): only checked after "
                        "commands, so an agent can fill this host's disk")
        stale = await sandbox_store.live_rows(self.store, self.daemon_id)
        ids = [row["id"] for row in stale]
        if ids:
            await sandbox_store.mark_stopped(self.store, ids, "daemon_restart")
            for sandbox_id in ids:
                await sandbox_store.delete_tokens(self.store, sandbox_id)
            await asyncio.to_thread(self._remove_dirs, ids)
        await asyncio.to_thread(self._sweep_dirs)
        reaped = {"rows": len(ids), "containers": 0, "networks": 0}
        try:
            containers, networks = await self.driver.list_labelled({"svc.daemon": self.daemon_id})
        except RuntimeUnavailable as exc:
            log.warning("not reaping orphans: %s", exc)
            return reaped
        await asyncio.gather(*(self.driver.remove_container(c["Id"]) for c in containers), return_exceptions=True)
        results = await asyncio.gather(*(self.driver.remove_network(n["Id"]) for n in networks), return_exceptions=True)
        reaped["containers"] = len(containers)
        reaped["networks"] = sum(1 for r in results if not isinstance(r, BaseException))
        reaped["firewall_rules"] = await self._reap_firewall()
        if ids or containers or networks or reaped["firewall_rules"]:
            log.info("reaped orphans of a previous run", extra=reaped)
        return reaped

    async def shutdown(self) -> None:
        self._closing = True
        await asyncio.gather(*(self.destroy(i, "daemon_shutdown") for i in list(self._live)), return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await self.driver.close()

    def _sweep_dirs(self) -> None:
        """Workspaces (their filesystems unmounted and images deleted first), runtime and evidence
        directories of sandboxes that are not live (a crash between creating a directory and
        recording the sandbox can leave one behind)."""
        released = self.disks.reap(set(self._live))
        if released:
            log.info("unmounted %d leftover workspace filesystem(s)", released)
        for root in (self.settings.workspaces_dir, self._runtime_root, self._evidence_root):
            try:
                entries = list(root.iterdir())
            except FileNotFoundError:
                continue
            for entry in entries:
                if entry.is_dir() and entry.name not in self._live and entry.name.startswith(("sb-", "sbx_")):
                    _rmtree(entry)

    def _remove_dirs(self, ids: list[str]) -> None:
        for sandbox_id in ids:
            self.disks.detach(sandbox_id, self.settings.workspaces_dir / sandbox_id)
            _rmtree(self.settings.workspaces_dir / sandbox_id)
            _rmtree(self._runtime_root / sandbox_id)
            _rmtree(self._evidence_root / sandbox_id)

    @property
    def _runtime_root(self) -> Path:
        return self.settings.home / "sandbox-runtime"

    @property
    def _evidence_root(self) -> Path:
        """Per-sandbox authoritative audit logs (audit.py). No container mounts anything here."""
        return self.settings.home / "sandbox-evidence"

    # --- create ------------------------------------------------------------------------------

    def live_count(self, tenant_id: str) -> int:
        return sum(1 for sb in self._live.values() if sb.tenant_id == tenant_id)

    async def create(
        self,
        tenant_id: str,
        *,
        spec: Any = None,
        spec_id: str | None = None,
        spec_version: int | None = None,
        image: str | None = None,
        services: list[str] | None = None,
        seed: str | None = None,
        timeout_s: float | None = None,
        metadata: dict | None = None,
        secrets: dict[str, str] | None = None,
        agent_bundle: Path | None = None,
        extra_env: dict[str, str] | None = None,
        shape: str = "B",
        wait: bool = True,
        required_env: list[str] | None = None,
        snapshot_egress: dict[str, list[Any]] | None = None,
    ) -> dict:
        if self._closing:
            raise AtCapacity(0, RETRY_AFTER_S, what="sandbox (daemon shutting down)")
        limit = self.settings.max_sandboxes
        if self.live_count(tenant_id) >= limit:
            raise AtCapacity(limit, RETRY_AFTER_S)
        image = image or (spec.base if spec is not None else None)
        if not image:
            raise InvalidRequest("a sandbox needs an image (shape A) or a spec (shape B)")
        if seed in (None, "") and spec is not None and spec.determinism is not None and spec.determinism.seed is not None:
            seed = spec.determinism.seed  # the spec pins its sandboxes' seed unless the request gives one
        seed = str(seed) if seed not in (None, "") else "seed_" + pysecrets.token_hex(8)
        limits = _limits(spec, timeout_s)
        sandbox_id = new_id("sb-" if shape == "B" else "sbx_", 8)
        runtime_dir = self._runtime_root / sandbox_id
        try:
            plans = plan_services(spec.services if spec is not None else None, services, seed, runtime_dir / "mocks")
        except ValueError as exc:
            raise InvalidRequest(str(exc), [{"loc": "services", "msg": str(exc)}])
        now = time.time()
        sb = SandboxRuntime(
            id=sandbox_id, tenant_id=tenant_id, shape=shape, seed=seed, image=image, plans=plans, limits=limits,
            workspace=self.settings.workspaces_dir / sandbox_id, runtime_dir=runtime_dir, created=now,
            expires=now + limits.timeout, spec=spec, spec_id=spec_id, spec_version=spec_version,
            metadata=dict(metadata or {}), provided_secrets=dict(secrets or {}), extra_env=dict(extra_env or {}),
            required_env=list(required_env or []), agent_bundle=Path(agent_bundle) if agent_bundle else None,
            snapshot_egress=dict(snapshot_egress or {}),
        )
        sb.audit = AuditLog(sandbox_id, self._evidence_root / sandbox_id / "audit.jsonl",
                            lambda event, _id=sandbox_id: self.events.publish(topic(_id), event), sb.secret_values,
                            workspace=sb.workspace)
        self._live[sandbox_id] = sb  # reserves the capacity slot before the first await
        try:
            declared = list(spec.secrets) if spec is not None else []
            await sandbox_store.insert(self.store, {
                "id": sandbox_id, "tenant_id": tenant_id, "daemon_id": self.daemon_id, "shape": shape,
                "state": "creating", "image": image, "services": [p.name for p in plans], "seed": seed,
                "spec_id": spec_id, "spec_version": spec_version, "metadata": sb.metadata,
                "resources": limits.as_dict(), "secret_names": sorted(set(declared) | set(sb.provided_secrets)),
                "created_at": _iso(now), "expires_at": _iso(sb.expires),
            })
        except BaseException:
            self._live.pop(sandbox_id, None)
            raise
        sb.expiry_task = self._spawn(self._expire(sb))
        sb.boot_task = self._spawn(self._boot(sb))
        if wait:
            try:
                await asyncio.shield(sb.boot_task)
            except asyncio.CancelledError:
                if not sb.boot_task.cancelled():
                    raise
                # Deleted while booting: answer once the teardown finished.
                await asyncio.wait_for(sb.ended.wait(), 120)
        return await self.get(sandbox_id)  # type: ignore[return-value]

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- boot --------------------------------------------------------------------------------

    def _publish(self, sb_id: str, event_type: str, data: dict[str, Any]) -> None:
        self.events.publish(topic(sb_id), {"event_type": event_type, "data": data})

    def _status(self, sb: SandboxRuntime, **data: Any) -> None:
        self._publish(sb.id, "status", data)

    async def _boot(self, sb: SandboxRuntime) -> None:
        try:
            await self._boot_steps(sb)
        except BootFailure as failure:
            await self._fail(sb, failure.step, failure.message)
        except RuntimeUnavailable as exc:
            await self._fail(sb, "runtime", f"{exc}; is dockerd running? (`docker info`, or `bash .ci/docker.sh`)")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("boot of %s failed unexpectedly", sb.id)
            await self._fail(sb, "internal", f"unexpected error during boot: {type(exc).__name__}: {exc}")

    async def _boot_steps(self, sb: SandboxRuntime) -> None:
        spec = sb.spec
        # 1. secrets
        from daemon.store.secrets import dashboard_secrets

        try:
            sb.secrets = await resolve_secrets(
                spec.secrets if spec is not None else {}, sb.provided_secrets,
                lambda: dashboard_secrets(self.store, sb.tenant_id),
            )
        except SecretError as exc:
            raise BootFailure("secrets", str(exc))
        self._status(sb, step="secrets_resolved", count=len(sb.secrets))

        # 2. images: qualified, present (or pullable)
        await self._check_images(sb)

        # 3. workspace (its own filesystem of resources.disk bytes) and the private directories
        # (a cancelled boot does not stop the thread: teardown waits for it before unmounting)
        job = sb.extension_state["workspace_job"] = asyncio.ensure_future(asyncio.to_thread(self._make_dirs, sb))
        job.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved even when nobody awaits it
        took = await asyncio.shield(job)
        self._status(sb, step="workspace_created", disk_limit=sb.limits.disk, enforced=sb.disk_mounted,
                     ms=int(took * 1000))
        if sb.disk_mounted:
            sb.disk_watch = self._spawn(self._watch_disk(sb))

        # 4. network
        sb.network = f"svc-{sb.id}"
        created = False
        for ext in self.extensions:
            hook = getattr(ext, "create_network", None)
            if hook is not None and await hook(self, sb):
                created = True
                break
        if not created:
            await self.driver.create_network(sb.network, self._labels(sb, role="network"), internal=True)
        await self._protect_network(sb)
        self._status(sb, step="network_created", host_firewall=self.firewall.enabled)

        # 5. agent environment and container spec; extensions (egress proxy, ...)
        token = await auth.create_sandbox_token(self.store, sb.tenant_id, sb.id)
        env: dict[str, str] = {}
        for plan in sb.plans:
            env.update(plan.agent_env)
        if spec is not None and spec.agent is not None:
            env.update(spec.agent.env)
        env.update(sb.extra_env)
        env.update({"SERVICE_SANDBOX_ID": sb.id, "SERVICE_SANDBOX_TOKEN": token, "SERVICE_SEED": sb.seed})
        binds = {str(sb.workspace): ("/workspace", "rw")}
        if sb.agent_bundle is not None:
            binds[str(sb.runtime_dir / "agent")] = ("/agent", "rw")
        agent_spec = ContainerSpec(
            name=f"svc-{sb.id}-agent", image=sb.image, entrypoint=AGENT_INIT,
            env=env, labels=self._labels(sb, role="agent"), network=sb.network, aliases=["sandbox"], binds=binds,
            working_dir="/workspace", hostname="sandbox", init=True, nano_cpus=int(sb.limits.cpus * 1e9),
            mem_limit=sb.limits.memory, pids_limit=sb.limits.pids,
        )
        for ext in self.extensions:
            await ext.on_network(self, sb, agent_spec)
        sb.agent_env = agent_spec.env

        # 6. agent container and services, in parallel
        async def start_agent() -> None:
            sb.agent = await self.driver.run_container(agent_spec)
            self._status(sb, step="container_started", runtime=self.driver.runtime)

        async def start_service(plan: ServicePlan) -> None:
            spec = ContainerSpec(
                name=f"svc-{sb.id}-{plan.name}", image=plan.image, command=plan.command, entrypoint=plan.entrypoint,
                env=dict(plan.env), labels={**self._labels(sb, role="service"), "svc.service": plan.name}, network=sb.network,
                aliases=[plan.name], binds=dict(plan.binds), init=True, hostname=plan.name,
            )
            for ext in self.extensions:
                hook = getattr(ext, "on_service", None)
                if hook is not None:
                    await hook(self, sb, plan, spec)
            info = await self.driver.run_container(spec, inspect=True)
            sb.services[plan.name] = info
            waited = await wait_ready(self.driver, plan, info)
            self._status(sb, step="service_ready", service=plan.name, waited_ms=int(waited * 1000))

        await _all_or_nothing([start_agent(), *(start_service(p) for p in sb.plans)])

        # 7. fixtures, in order
        if spec is not None:
            for index, fixture in enumerate(spec.fixtures):
                await self._apply_fixture(sb, index, fixture)

        # 8. snapshot required_env
        missing = [name for name in sb.required_env if not (sb.agent_env.get(name) or sb.secrets.get(name))]
        if missing:
            raise BootFailure("required_env", (
                f"the agent snapshot requires environment variable{'s' if len(missing) > 1 else ''} "
                f"{', '.join(repr(m) for m in missing)} (auth.required_env) but the sandbox does not provide "
                f"{'them' if len(missing) > 1 else 'it'}; declare {'them' if len(missing) > 1 else 'it'} under the spec's "
                "secrets: (or agent.env) or pass the value in the request's secrets"))

        # 9. agent bundle -> /agent
        if sb.agent_bundle is not None:
            await asyncio.to_thread(_extract_bundle, sb.agent_bundle, sb.runtime_dir / "agent")
            self._status(sb, step="bundle_extracted")

        # 10. setup commands
        if spec is not None:
            for command in spec.setup.commands:
                remaining = max(1.0, sb.expires - time.time())
                result = await self._run(sb, command, timeout_s=remaining, env=None, workdir="/workspace", user=None,
                                         background=False, record=True, transition=False)
                self._status(sb, step="setup_command", command=command, exit_code=result.exit_code)
                if result.exit_code != 0:
                    why = "timed out" if result.timed_out else f"exited with {result.exit_code}"
                    tail = _tail(result.stderr or result.stdout)
                    raise BootFailure("setup", f"setup command `{command}` {why}" + (f"; output:\n{tail}" if tail else "")
                                      + "\nfix the command in the spec's setup.commands")

        # 11. manifest, ready
        sb.manifest = await asyncio.to_thread(ws.manifest, str(sb.workspace))
        sb.manifest_taken_at = now_iso()
        for ext in self.extensions:
            hook = getattr(ext, "on_ready", None)
            if hook is not None:
                await hook(self, sb)
        sb.state = "ready"
        await sandbox_store.update(self.store, sb.id, state="ready", ready_at=now_iso())
        self._status(sb, state="ready")

    async def _protect_network(self, sb: SandboxRuntime) -> None:
        """Firewall the sandbox network off from the host (daemon/sandbox/firewall.py), before any
        container joins it. Fails the boot when that is not possible."""
        if not self.firewall.enabled:
            log.warning("sandbox %s boots without the host firewall (SERVICE_SANDBOX_FIREWALL=off): its containers "
                        "can connect to services on this host", sb.id)
            return
        sb.extension_state["firewall"] = True  # teardown removes whatever was installed
        try:
            bridge = await self.driver.network_bridge(sb.network)
            await self.firewall.protect(bridge, sb.id, self.daemon_id)
        except RuntimeUnavailable:
            raise
        except Exception as exc:
            what = str(exc) if isinstance(exc, FirewallError) else f"cannot find the bridge of {sb.network}: {exc}"
            raise BootFailure("network", (
                f"cannot firewall the sandbox network off from this host: {what}. The daemon needs root (CAP_NET_ADMIN) "
                "and iptables (SERVICE_IPTABLES names the binary); to boot sandboxes without this protection set "
                "SERVICE_SANDBOX_FIREWALL=off (their containers can then connect to services on this host)"))

    async def _reap_firewall(self) -> int:
        if not self.firewall.enabled:
            return 0
        try:
            return await self.firewall.reap(self.daemon_id, set(self._live))
        except FirewallError as exc:
            log.warning("cannot remove leftover host firewall rules of sandboxes: %s", exc)
            return 0

    def _labels(self, sb: SandboxRuntime, role: str) -> dict[str, str]:
        return {**sb.labels, "svc.daemon": self.daemon_id, "svc.role": role}

    def _make_dirs(self, sb: SandboxRuntime) -> float:
        """Returns the seconds the workspace took (its filesystem: diskquota.py)."""
        started = time.perf_counter()
        sb.workspace.mkdir(parents=True, exist_ok=True)
        if self.disks.enabled:
            self.disks.attach(sb.id, sb.workspace, sb.limits.disk)  # BootFailure("workspace", ...) names the step
            sb.disk_mounted = True
        took = time.perf_counter() - started
        os.chmod(sb.workspace, 0o777)  # the agent may run as any user in its image
        (sb.workspace / ".svc").mkdir(exist_ok=True)
        self._evidence_root.mkdir(mode=0o700, exist_ok=True)
        (self._evidence_root / sb.id).mkdir(mode=0o700, exist_ok=True)
        sb.runtime_dir.mkdir(parents=True, exist_ok=True)
        for plan in sb.plans:
            if plan.type == "http_mock":
                (sb.runtime_dir / "mocks" / plan.name).mkdir(parents=True, exist_ok=True)
        if sb.agent_bundle is not None:
            (sb.runtime_dir / "agent").mkdir(exist_ok=True)
        return took

    async def _check_images(self, sb: SandboxRuntime) -> None:
        from daemon.spec.types import check_image_ref

        refs = [("base image", sb.image)] + [(f"service '{p.name}' image", p.image) for p in sb.plans]
        for what, ref in refs:
            try:
                check_image_ref(ref)
            except ValueError as exc:
                raise BootFailure("image", f"{what}: {exc}")

        async def ensure(what: str, ref: str) -> None:
            try:
                await self.driver.ensure_image(ref)
            except ImageUnavailable as exc:
                from daemon.sandbox.images import STOCK_IMAGES

                hint = "run `svc images build`" if ref in STOCK_IMAGES else "build it (or `docker pull` it where a registry is reachable)"
                raise BootFailure("image", f"{what} {ref} not found locally and could not be pulled ({exc}); {hint}")

        seen: dict[str, str] = {}
        for what, ref in refs:
            seen.setdefault(ref, what)
        await _all_or_nothing([ensure(what, ref) for ref, what in seen.items()])

    async def run_aux_container(self, sb: SandboxRuntime, spec: ContainerSpec, inspect: bool = True) -> ContainerInfo:
        """Start a helper container (e.g. an egress proxy) labelled as part of `sb`; it is removed
        with the sandbox."""
        spec.labels = {**spec.labels, **self._labels(sb, role=spec.labels.get("svc.role", "aux"))}
        info = await self.driver.run_container(spec, inspect=inspect)
        sb.aux.append(info)
        return info

    async def _apply_fixture(self, sb: SandboxRuntime, index: int, fixture: Any) -> None:
        if hasattr(fixture, "service"):
            plan = next((p for p in sb.plans if p.name == fixture.service), None)
            if plan is None or plan.type != "postgres":
                raise BootFailure("fixtures", f"fixture {index}: service '{fixture.service}' is not a postgres service of this sandbox")
            if hasattr(fixture, "sql"):
                sql, origin = fixture.sql, "inline sql"
            else:
                _, entries = await self._fixture_blobs(sb, index, fixture.path, single=True)
                try:
                    sql = entries[0][1].decode("utf-8")
                except UnicodeDecodeError:
                    raise BootFailure("fixtures", f"fixture {index} ({fixture.path}): the SQL file is not UTF-8 text")
                origin = str(fixture.path)
            container = sb.services[plan.name].id
            target = f"/tmp/svc-fixture-{index}.sql"
            await self.driver.put_file(container, target, sql.encode())
            raw = await self.driver.exec(container, ["psql", "-v", "ON_ERROR_STOP=1", "-X", "-q", "-U", plan.user or "postgres",
                                                     "-d", plan.database or "postgres", "-f", target], watchdog_s=300)
            if raw.exit_code != 0:
                err = (raw.stderr or raw.stdout).decode("utf-8", "replace").strip()
                raise BootFailure("fixtures", f"fixture {index} ({origin}) failed on service '{plan.name}': "
                                              f"{_tail(err, 1500) or f'psql exited with {raw.exit_code}'}")
            self._status(sb, step="fixture_applied", index=index, service=plan.name)
        else:
            name, entries = await self._fixture_blobs(sb, index, fixture.path, single=False)
            try:
                await asyncio.to_thread(_write_fixture, entries, name, str(sb.workspace), fixture.to)
            except ws.PathError as exc:
                raise BootFailure("fixtures", f"fixture {index} ({fixture.path}): {exc}")
            self._status(sb, step="fixture_applied", index=index, path=str(fixture.path))

    async def _fixture_blobs(self, sb: SandboxRuntime, index: int, raw: str,
                             single: bool) -> tuple[str | None, list[tuple[str, bytes, int]]]:
        """The content of a `path:` fixture, from the files uploaded with the spec version (blobs);
        never from the daemon's host. Returns (file name, [(path, bytes, mode)]) for one file, or
        (None, [(path under the directory, bytes, mode), ...]) for a directory."""
        from daemon.agents.blobs import Blobs
        from daemon.spec.services import fixture_path_key
        from daemon.store import specs as spec_store

        if sb.fixture_files is None:
            sb.fixture_files = {}
            if sb.spec_id and sb.spec_version:
                sb.fixture_files = await spec_store.files(self.store, sb.tenant_id, sb.spec_id, sb.spec_version)
        try:
            key = fixture_path_key(raw)
        except ValueError as exc:
            raise BootFailure("fixtures", f"fixture {index}: {exc}")
        if key in sb.fixture_files:
            chosen, name = [(key, key.rsplit("/", 1)[-1])], key.rsplit("/", 1)[-1]
        elif not single:
            chosen = [(p, p if key == "." else p[len(key) + 1:]) for p in sorted(sb.fixture_files)
                      if key == "." or p.startswith(key + "/")]
            name = None
        else:
            chosen, name = [], None
        if not chosen:
            where = f"spec '{sb.spec_id}' version {sb.spec_version}" if sb.spec_id else "this sandbox (it has no stored spec)"
            raise BootFailure("fixtures", (
                f"fixture {index}: file '{raw}' was not uploaded with {where}; the daemon never reads fixture paths on its "
                "own host: upload the spec with the svc CLI (`svc specs upload SPEC.yaml`), which sends the files"))
        blobs = Blobs(self.settings.blobs_dir)

        def read() -> list[tuple[str, bytes, int]]:
            out = []
            for path, rel in chosen:
                info = sb.fixture_files[path]  # type: ignore[index]
                try:
                    data = blobs.path(info["digest"]).read_bytes()
                except (OSError, ValueError) as exc:
                    raise BootFailure("fixtures", f"fixture {index} ({raw}): the uploaded file '{path}' is missing from "
                                                  f"the blob store ({type(exc).__name__}); upload the spec again")
                out.append((rel, data, int(info.get("mode") or 0o644) & 0o777))
            return out

        return name, await asyncio.to_thread(read)

    async def _fail(self, sb: SandboxRuntime, step: str, message: str) -> None:
        message = redact(message, sb.secret_values())
        log.info("sandbox %s failed to boot at %s: %s", sb.id, step, message.splitlines()[0] if message else "")
        sb.state = "error"
        await sandbox_store.update(self.store, sb.id, state="error", error_step=step, error_message=message)
        self._status(sb, state="error", step=step, message=message)
        if sb.expiry_task is not None and sb.expiry_task is not asyncio.current_task():
            sb.expiry_task.cancel()
        await self._teardown(sb)
        await sandbox_store.update(self.store, sb.id, stopped_at=now_iso(), stop_reason="boot_failed")
        self._finish(sb)

    # --- destroy -----------------------------------------------------------------------------

    async def destroy(self, sandbox_id: str, reason: str = "deleted") -> None:
        """Stop the sandbox and release everything (containers, network, workspace, token).
        Cancels a boot in progress. A sandbox that is already stopped (or failed) is left as is."""
        sb = self._live.get(sandbox_id)
        if sb is None:
            return
        async with sb.destroy_lock:
            if sandbox_id not in self._live:
                return
            current = asyncio.current_task()
            if sb.boot_task is not None and not sb.boot_task.done() and sb.boot_task is not current:
                sb.boot_task.cancel()
                try:
                    await sb.boot_task
                except BaseException:
                    pass
                if sandbox_id not in self._live:  # the boot failed on its own meanwhile
                    return
            if sb.expiry_task is not None and sb.expiry_task is not current:
                sb.expiry_task.cancel()
            await self._teardown(sb)
            sb.state = "stopped"
            await sandbox_store.update(self.store, sb.id, state="stopped", stopped_at=now_iso(), stop_reason=reason)
            self._finish(sb)

    def _finish(self, sb: SandboxRuntime) -> None:
        sb.ended.set()
        self._status(sb, state="destroyed")
        self.events.close(topic(sb.id))
        self._live.pop(sb.id, None)
        sb.secrets = {}
        sb.provided_secrets = {}
        try:
            asyncio.get_running_loop().call_later(TOPIC_RETENTION_S, self.events.forget, topic(sb.id))
        except RuntimeError:
            pass

    async def _teardown(self, sb: SandboxRuntime) -> None:
        if sb.disk_watch is not None:
            sb.disk_watch.cancel()
        job = sb.extension_state.get("workspace_job")
        if job is not None and not job.done():
            await asyncio.wait([job], timeout=120)  # mkfs/mount still running: let it finish, then undo it
        for ext in self.extensions:
            try:
                await ext.on_destroy(self, sb)
            except Exception:
                log.exception("boot extension teardown failed for %s", sb.id)
        if os.geteuid() != 0 and sb.agent is not None:
            # Files the agent created as root cannot be removed by a non-root daemon otherwise.
            try:
                await self.driver.exec(sb.agent.id, ["sh", "-c", "chmod -R a+rwX /workspace /agent 2>/dev/null"], watchdog_s=30)
            except Exception:
                pass
        try:
            containers, _ = await self.driver.list_labelled({"svc.sandbox": sb.id, "svc.daemon": self.daemon_id})
            ids = {c["Id"] for c in containers}
        except Exception as exc:
            log.warning("cannot list containers of %s: %s", sb.id, exc)
            ids = set()
        ids |= {c.id for c in [sb.agent, *sb.services.values(), *sb.aux] if c is not None}
        results = await asyncio.gather(*(self.driver.remove_container(i) for i in ids), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.warning("removing a container of %s failed: %s", sb.id, result)
        if sb.network is not None:
            try:
                await self.driver.remove_network(sb.network)
            except Exception as exc:
                log.warning("removing network of %s failed: %s", sb.id, exc)
        if sb.extension_state.get("firewall"):
            try:
                await self.firewall.release(sb.id)
            except FirewallError as exc:
                log.warning("removing the host firewall rules of %s failed: %s", sb.id, exc)
        try:
            await sandbox_store.delete_tokens(self.store, sb.id)
        except Exception:
            log.exception("deleting the token of %s failed", sb.id)
        await asyncio.to_thread(self._remove_dirs, [sb.id])

    async def _expire(self, sb: SandboxRuntime) -> None:
        while True:
            delay = sb.expires - time.time()
            if delay <= 0:
                break
            await asyncio.sleep(min(delay, 3600))
        log.info("sandbox %s reached its timeout", sb.id)
        await self.destroy(sb.id, reason="timeout")

    async def set_timeout(self, sandbox_id: str, seconds: float) -> dict:
        """Set the remaining life to `seconds` from now; Conflict when the sandbox is stopped."""
        sb = await self._require_live(sandbox_id)
        sb.expires = time.time() + seconds
        await sandbox_store.update(self.store, sb.id, expires_at=_iso(sb.expires))
        if sb.expiry_task is not None:
            sb.expiry_task.cancel()
        sb.expiry_task = self._spawn(self._expire(sb))
        return await self.get(sandbox_id)  # type: ignore[return-value]

    # --- read --------------------------------------------------------------------------------

    async def get(self, sandbox_id: str) -> dict | None:
        row = await sandbox_store.get(self.store, sandbox_id)
        return sandbox_store.body(row) if row is not None else None

    def runtime(self, sandbox_id: str) -> SandboxRuntime | None:
        """The live sandbox's in-memory record (None once stopped)."""
        return self._live.get(sandbox_id)

    def workspace_path(self, sandbox_id: str) -> Path:
        return self.settings.workspaces_dir / sandbox_id

    def audit_log(self, sandbox_id: str) -> AuditLog:
        sb = self._live.get(sandbox_id)
        if sb is None or sb.audit is None:
            raise NotFound("sandbox", sandbox_id, f"sandbox '{sandbox_id}' is not running")
        return sb.audit

    def secret_values(self, sandbox_id: str) -> dict[str, str]:
        sb = self._live.get(sandbox_id)
        return dict(sb.secrets) if sb is not None else {}

    def service_plan(self, sandbox_id: str, service: str) -> ServicePlan:
        sb = self._live.get(sandbox_id)
        if sb is None:
            raise NotFound("sandbox", sandbox_id, f"sandbox '{sandbox_id}' is not running")
        plan = next((p for p in sb.plans if p.name == service), None)
        if plan is None:
            raise NotFound("service", service, f"sandbox '{sandbox_id}' has no service '{service}'")
        return plan

    async def _require_live(self, sandbox_id: str, wait_boot: float | None = None) -> SandboxRuntime:
        sb = self._live.get(sandbox_id)
        if sb is None:
            row = await sandbox_store.get(self.store, sandbox_id)
            if row is None:
                raise NotFound("sandbox", sandbox_id)
            raise Conflict(f"sandbox '{sandbox_id}' is {row['state']}", row["state"])
        if sb.state == "creating" and wait_boot is not None and sb.boot_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(sb.boot_task), wait_boot)
            except asyncio.TimeoutError:
                raise Conflict(f"sandbox '{sandbox_id}' is still booting", "creating")
            except BaseException:
                pass
            return await self._require_live(sandbox_id)
        return sb

    async def _require_ready(self, sandbox_id: str, wait_boot: float = 120.0) -> SandboxRuntime:
        sb = await self._require_live(sandbox_id, wait_boot)
        if sb.state not in ("ready", "running"):
            raise Conflict(f"sandbox '{sandbox_id}' is {sb.state}", sb.state)
        return sb

    # --- commands ----------------------------------------------------------------------------

    async def exec(self, sandbox_id: str, command: str | list[str], *, timeout_s: float | None = None,
                   env: dict[str, str] | None = None, workdir: str = "/workspace", background: bool = False,
                   user: str | None = None, record: bool = True) -> ExecResult:
        if not command:
            raise InvalidRequest("command must not be empty")
        sb = await self._require_ready(sandbox_id)
        remaining = max(1.0, sb.expires - time.time())
        limit = min(timeout_s or DEFAULT_COMMAND_TIMEOUT_S, remaining)
        return await self._run(sb, command, timeout_s=limit, env=env, workdir=workdir, user=user, background=background,
                               record=record, transition=True)

    async def _run(self, sb: SandboxRuntime, command: str | list[str], *, timeout_s: float, env: dict[str, str] | None,
                   workdir: str, user: str | None, background: bool, record: bool, transition: bool) -> ExecResult:
        argv = ["sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]
        wrapped = ["timeout", "-k", str(TIMEOUT_GRACE_S), f"{timeout_s:g}", *argv]
        text = command_text(command)
        if transition and sb.state == "ready":
            sb.state = "running"
            await sandbox_store.update(self.store, sb.id, state="running")
            self._status(sb, state="running")
        assert sb.agent is not None
        try:
            raw = await self.driver.exec(sb.agent.id, wrapped, env={**sb.secrets, **(env or {})}, workdir=workdir, user=user,
                                         detach=background, watchdog_s=None if background else timeout_s + TIMEOUT_GRACE_S + 10)
        except Exception:
            if sb.id not in self._live or sb.state not in LIVE_STATES:
                raise Conflict(f"sandbox '{sb.id}' was stopped while the command ran", "stopped")
            raise
        if raw.exit_code is None and not background and (sb.id not in self._live or sb.state not in LIVE_STATES):
            raise Conflict(f"sandbox '{sb.id}' was stopped while the command ran", "stopped")
        result = await self._result(sb, text, raw, timeout_s, background)
        self._publish(sb.id, "command", {"command": text, "exit_code": result.exit_code, "duration_ms": result.duration_ms,
                                         **({"timed_out": True} if result.timed_out else {}),
                                         **({"oom_killed": True} if result.oom_killed else {}),
                                         **({"background": True} if background else {})})
        if record and sb.audit is not None:
            details: dict[str, Any] = {"command": text, "exit_code": result.exit_code, "duration_ms": result.duration_ms,
                                       "output_bytes": len(raw.stdout) + len(raw.stderr) + raw.stdout_dropped + raw.stderr_dropped}
            if background:
                details["background"] = True
            if result.timed_out:
                details["timed_out"] = True
            if result.oom_killed:
                details["oom_killed"] = True
            if self._stdout_capture(sb) and not background:
                from daemon.sandbox.redact import RawCapture, chunks

                pieces = chunks(result.stdout)
                details["stdout"] = pieces[0] if pieces else ""
                details["stdout_chunks"] = pieces  # 4 KB each (redacted by the audit log)
                RawCapture(sb.runtime_dir / "raw").append(text, result.stdout)  # unredacted, daemon-only: scoring
            sb.audit.record("process_spawn", details)
        await self._check_workspace_size(sb)
        return result

    def _stdout_capture(self, sb: SandboxRuntime) -> bool:
        return bool(sb.spec is not None and sb.spec.audit.stdout_capture)

    async def _result(self, sb: SandboxRuntime, text: str, raw: RawExec, timeout_s: float, background: bool) -> ExecResult:
        duration_ms = int(raw.duration_s * 1000)
        if background:
            return ExecResult(text, "", "", None, duration_ms, background=True)
        stdout = raw.stdout.decode("utf-8", "replace")
        stderr = raw.stderr.decode("utf-8", "replace")
        if raw.stdout_dropped:
            stdout += f"\n[svc] output truncated: {raw.stdout_dropped} more bytes of stdout not shown\n"
        if raw.stderr_dropped:
            stderr += f"\n[svc] output truncated: {raw.stderr_dropped} more bytes of stderr not shown\n"
        code = raw.exit_code
        timed_out = raw.killed_by_watchdog or (code in (124, 137) and raw.duration_s >= timeout_s - 0.05)
        oom = False
        if code == 137 and not timed_out and sb.agent is not None:
            count = await self.driver.oom_kill_count(sb.agent.id)
            if count is not None and count > sb.oom_kills:
                sb.oom_kills = count
                oom = True
        if timed_out:
            stderr += f"\n[svc] command timed out after {timeout_s:g}s and was killed\n"
        elif oom:
            stderr += (f"\n[svc] command was killed: out of memory (the sandbox's memory limit is "
                       f"{_size(sb.limits.memory)}; raise resources.memory in the spec)\n")
        return ExecResult(text, stdout, stderr, code, duration_ms, timed_out=timed_out, oom_killed=oom)

    async def service_exec(self, sandbox_id: str, service: str, command: list[str], timeout_s: float = 30) -> ExecResult:
        sb = await self._require_ready(sandbox_id)
        info = sb.services.get(service)
        if info is None:
            raise NotFound("service", service, f"sandbox '{sandbox_id}' has no service '{service}'")
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        raw = await self.driver.exec(info.id, argv, watchdog_s=timeout_s)
        stdout = raw.stdout.decode("utf-8", "replace")
        stderr = raw.stderr.decode("utf-8", "replace")
        if raw.killed_by_watchdog:
            stderr += f"\n[svc] command timed out after {timeout_s:g}s and was killed\n"
        return ExecResult(command_text(command), stdout, stderr, raw.exit_code, int(raw.duration_s * 1000),
                          timed_out=raw.killed_by_watchdog)

    async def mock_requests(self, sandbox_id: str, service: str) -> list[dict]:
        sb = await self._require_live(sandbox_id)
        plan = next((p for p in sb.plans if p.name == service), None)
        if plan is None:
            raise NotFound("service", service, f"sandbox '{sandbox_id}' has no service '{service}'")
        if plan.type != "http_mock":
            raise InvalidRequest(f"service '{service}' is a {plan.type} service, not an http_mock")
        path = mock_requests_path(sb.runtime_dir / "mocks", service)

        def read() -> list[dict]:
            import json

            try:
                lines = path.read_text().splitlines()
            except FileNotFoundError:
                return []
            out = []
            for line in lines:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a line being written right now
            return out

        return await asyncio.to_thread(read)

    # --- workspace ---------------------------------------------------------------------------

    async def _check_workspace_size(self, sb: SandboxRuntime, force: bool = False) -> None:
        """Has the workspace hit `limits.disk`? Then a `warning` audit event (once) and
        `limits_exceeded: ["workspace"]` (the runner makes that an `error` verdict).

        Enforced (its own filesystem, diskquota.py): one statvfs, "full" when less than
        `full_margin` is left; after every command and file write and every DISK_POLL_S.
        SERVICE_WORKSPACE_QUOTA=off: the apparent size of the tree against the limit, after every
        command and file write; when the last walk of the workspace was slow (big trees), at most
        every SIZE_CHECK_INTERVAL_S, with a deferred check so a change is never missed."""
        if "workspace" in sb.limits_exceeded:
            return
        if sb.disk_mounted:
            try:
                use = disk_usage(sb.workspace)
            except OSError:
                return
            if use.full:
                await self._workspace_limit_reached(sb, use.used, enforced=True)
            return
        now = time.monotonic()
        if not force and sb.size_check_cost > 0.05 and now - sb.size_checked < SIZE_CHECK_INTERVAL_S * 5:
            if sb.size_check_pending is None or sb.size_check_pending.done():
                async def later() -> None:
                    await asyncio.sleep(SIZE_CHECK_INTERVAL_S * 5)
                    if sb.id in self._live:
                        await self._check_workspace_size(sb, force=True)

                sb.size_check_pending = self._spawn(later())
            return
        sb.size_checked = now
        size = await asyncio.to_thread(ws.disk_usage, str(sb.workspace), sb.limits.disk)
        sb.size_check_cost = time.monotonic() - now
        if size > sb.limits.disk:
            await self._workspace_limit_reached(sb, size, enforced=False)

    async def _workspace_limit_reached(self, sb: SandboxRuntime, size: int, enforced: bool) -> None:
        if "workspace" in sb.limits_exceeded:
            return
        sb.limits_exceeded.append("workspace")
        if enforced:
            message = (f"the workspace reached its {_size(sb.limits.disk)} limit (resources.disk): writes beyond it "
                       "fail with 'No space left on device'")
        else:
            message = f"the workspace holds more than its {_size(sb.limits.disk)} limit (resources.disk)"
        sb.disk_exceeded = {"kind": "workspace_size", "limit_bytes": sb.limits.disk, "size_bytes": size,
                            "enforced": enforced, "message": message}
        log.info("sandbox %s: %s", sb.id, message)
        if sb.audit is not None:
            sb.audit.record("warning", dict(sb.disk_exceeded))
        await sandbox_store.update(self.store, sb.id, limits_exceeded=sb.limits_exceeded)

    async def _watch_disk(self, sb: SandboxRuntime) -> None:
        """Polls an enforced workspace (a cheap statvfs) so hitting the limit is noticed even when no
        command ends, e.g. an image agent or a long-running process."""
        while sb.id in self._live and sb.state in LIVE_STATES and "workspace" not in sb.limits_exceeded:
            await asyncio.sleep(DISK_POLL_S)
            try:
                await self._check_workspace_size(sb)
            except Exception:  # noqa: BLE001 - never let the watch kill anything
                log.exception("workspace size check of %s failed", sb.id)
                return

    async def workspace_limit(self, sandbox_id: str) -> dict[str, Any] | None:
        """After one more check: the `warning` details when the sandbox's workspace hit its disk
        limit (resources.disk) at any point, else None."""
        sb = self._live.get(sandbox_id)
        if sb is None:
            return None
        await self._check_workspace_size(sb, force=True)
        return dict(sb.disk_exceeded) if sb.disk_exceeded else None

    async def state(self, sandbox_id: str) -> dict:
        sb = await self._require_ready(sandbox_id)
        files = await asyncio.to_thread(ws.manifest, str(sb.workspace))
        return {"sandbox_id": sb.id, "root": ws.ROOT, "taken_at": now_iso(), "files": files}

    async def diff(self, sandbox_id: str) -> dict:
        sb = await self._require_ready(sandbox_id)
        files = await asyncio.to_thread(ws.manifest, str(sb.workspace))
        changes = ws.diff(sb.manifest or [], files)
        return {"sandbox_id": sb.id, "since": sb.manifest_taken_at, **changes}

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> dict:
        rel = _checked_path(path)
        if ws.is_reserved(rel):
            raise InvalidRequest(f"'{path}' is inside /workspace/.svc, which the daemon owns; write elsewhere")
        sb = await self._require_ready(sandbox_id)
        try:
            result = await asyncio.to_thread(ws.write_file, str(sb.workspace), rel, data)
        except ws.PathError as exc:
            raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
        await self._check_workspace_size(sb, force=True)
        return result

    async def read_file(self, sandbox_id: str, path: str) -> bytes:
        rel = _checked_path(path)
        sb = await self._require_ready(sandbox_id)
        if rel == AuditLog.COPY and sb.audit is not None:
            # the daemon's own copy (audit.py), not whatever the agent left in the workspace
            return await asyncio.to_thread(sb.audit.raw)
        try:
            return await asyncio.to_thread(ws.read_file, str(sb.workspace), rel)
        except ws.PathError as exc:
            raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
        except (ws.FileMissing, FileNotFoundError):
            raise NotFound("file", rel, f"no file '{rel}' in the workspace of sandbox '{sandbox_id}'")

    async def open_file(self, sandbox_id: str, path: str) -> tuple[int, int] | bytes:
        """For streaming (GET .../files/{path}): `(fd, size)` of the workspace file, opened like
        read_file opens it (the caller closes the fd), or the bytes when the daemon serves its own
        copy (the audit log)."""
        rel = _checked_path(path)
        sb = await self._require_ready(sandbox_id)
        if rel == AuditLog.COPY and sb.audit is not None:
            return await asyncio.to_thread(sb.audit.raw)
        try:
            fd = await asyncio.to_thread(ws.open_under, str(sb.workspace), rel, os.O_RDONLY)
        except ws.PathError as exc:
            raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
        except (ws.FileMissing, FileNotFoundError):
            raise NotFound("file", rel, f"no file '{rel}' in the workspace of sandbox '{sandbox_id}'")
        return fd, os.fstat(fd).st_size

    async def delete_file(self, sandbox_id: str, path: str) -> None:
        rel = _checked_path(path)
        if ws.is_reserved(rel):
            raise InvalidRequest(f"'{path}' is inside /workspace/.svc, which the daemon owns")
        sb = await self._require_ready(sandbox_id)
        try:
            await asyncio.to_thread(ws.delete_file, str(sb.workspace), rel)
        except ws.PathError as exc:
            raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
        except (ws.FileMissing, FileNotFoundError):
            raise NotFound("file", rel, f"no file '{rel}' in the workspace of sandbox '{sandbox_id}'")


# --- helpers -------------------------------------------------------------------------------------


def _checked_path(path: str) -> str:
    try:
        rel = ws.normalize(path)
    except ws.PathError as exc:
        raise InvalidRequest(str(exc), [{"loc": "path", "msg": str(exc)}])
    if len(rel.encode("utf-8", "surrogatepass")) > 4096 or any(len(p.encode("utf-8", "surrogatepass")) > 255 for p in rel.split("/")):
        message = "path is too long (at most 4096 bytes, 255 per file or directory name)"
        raise InvalidRequest(message, [{"loc": "path", "msg": message}])
    return rel


def _limits(spec: Any, timeout_s: float | None) -> Limits:
    limits = Limits()
    res = spec.resources if spec is not None else None
    if res is not None:
        if res.cpus is not None:
            limits.cpus = float(res.cpus)
        if res.memory is not None:
            limits.memory = int(res.memory)
        if res.pids is not None:
            limits.pids = int(res.pids)
        if res.disk is not None:
            limits.disk = int(res.disk)
        if res.timeout is not None:
            limits.timeout = float(res.timeout)
    if timeout_s is not None:
        limits.timeout = float(timeout_s)
    return limits


async def _all_or_nothing(coros: list) -> None:
    """Run concurrently; on the first failure cancel the rest and raise that failure (a
    BootFailure when there is one)."""
    if not coros:
        return
    try:
        async with asyncio.TaskGroup() as group:
            for coro in coros:
                group.create_task(coro)
    except BaseExceptionGroup as group_error:
        boot = [e for e in _leaves(group_error) if isinstance(e, BootFailure)]
        if boot:
            raise boot[0] from None
        first = next(iter(_leaves(group_error)))
        raise first from None


def _leaves(group: BaseExceptionGroup):
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


def _tail(text: str, limit: int = 800) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _size(num: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if num >= size:
            value = num / size
            return f"{value:g}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{num}B"


def _rmtree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)


def _extract_bundle(bundle: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(bundle, "r:*") as tar:
            tar.extractall(target, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise BootFailure("bundle", f"cannot extract the agent bundle {bundle.name}: {exc}")


def _write_fixture(entries: list[tuple[str, bytes, int]], name: str | None, root: str, to: str) -> None:
    """Write an uploaded fixture into the workspace at `to`: one file (`name` set: into the
    directory `to`, or as the file `to`), or a directory's files (`name` None) below `to`."""
    base = "" if to.rstrip("/") in ("/workspace", "") else ws.normalize(to)
    if name is None:
        for rel, data, mode in entries:
            ws.write_file(root, f"{base}/{rel}" if base else rel, data, mode)
        return
    _, data, mode = entries[0]
    target_is_dir = not base or to.endswith("/") or ws.is_dir(root, base)
    rel = (f"{base}/{name}" if base else name) if target_is_dir else base
    ws.write_file(root, rel, data, mode)
