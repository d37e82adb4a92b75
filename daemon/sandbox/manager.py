"""`SandboxManager`: creates, boots, runs commands in, watches and destroys sandboxes.

It lives at `app[SANDBOXES]` (created by `daemon.api.sandboxes.setup`). Other parts of the daemon
(runs, scoring, replicas, the egress proxy and the db audit) use it through these methods:

    boot(tenant_id, *, spec=None, spec_id=None, spec_version=None, image=None, services=None,
         seed=None, timeout_s=None, metadata=None, secrets=None, agent_bundle=None, extra_env=None,
         shape="B", required_env=None, snapshot_egress=None) -> Booting
        A new sandbox, booting: `Booting.id` at once, `await Booting.result()` -> BootResult once
        the boot ended (a `Sandbox` handle when ready; else `state: error` with the step and
        message, everything torn down). Raises AtCapacity (503) when the tenant already has
        `settings.max_sandboxes` live ones, InvalidRequest for an unusable request. The sandbox's
        row (daemon.store.sandboxes) is its durable record; the API shapes its body from it.
        `snapshot_egress` is an agent snapshot's `auth.egress` (host -> ports): the network policy
        adds those to the egress allowlist when the spec's `network.egress` is compatible
        (network.py `egress_policy`).
    open(sandbox_id) -> Sandbox               a handle on a live sandbox (handle.py): what a run uses
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
    set_timeout(sandbox_id, seconds)          remaining life from now
    destroy(sandbox_id, reason="deleted")     stops it and releases everything; idempotent
    service_plan(sandbox_id, service)         how a service was configured (user, database, port)
    secret_values(sandbox_id) -> dict         the resolved secrets (memory only; e.g. for
                                              `forbidden.secrets_in_logs`); never log them

Boot pipeline: the named steps of `boot.STEPS` over one `BootContext` (boot.py has the list, the
`status` event each publishes on the lifecycle stream `sandbox:<id>` and the step name each
failure carries). Boot extensions (`boot.BootExtension`: network policy and proxies in network.py,
trace routing) hook into it. Any failure: state `error` with `error: {step, message}`, everything
torn down, then `destroyed` and the stream closes.

The manager is this module (boot, open, the boot task) and parts it builds, each a class given
its collaborators: `lifecycle.SandboxLifecycle` (expiry, destroy, teardown, reaping),
`commands.SandboxCommands` (exec), `files.WorkspaceFiles` (workspace files, disk limit) and
`pool.SandboxPool`; they share one registry of live sandboxes (`runtime.LiveSandboxes`), the
lifecycle stream (`runtime.SandboxEvents`) and the background tasks (`runtime.BackgroundTasks`).
Boot steps and extensions get a `boot.BootContext` (`boot_context(sb)`), never the manager.

Every container, network and volume carries the labels `svc.sandbox`, `svc.tenant`, `svc.daemon`
(plus `svc.role`, `svc.service`). On start the manager marks the rows of sandboxes it no longer runs
as stopped and removes everything labelled with its daemon id; every `SERVICE_REAP_INTERVAL` seconds
it removes what no live, booting or pooled sandbox owns (lifecycle.py `sweep`); on shutdown it
destroys every live sandbox, then removes everything still labelled with its id.
"""
from __future__ import annotations

import asyncio
import logging
import secrets as pysecrets
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Coroutine

from daemon.errors import AtCapacity, InvalidRequest, NotFound
from daemon.sandbox.audit import AuditLog
from daemon.sandbox.build import foreign_build_tag, is_build, spec_image
from daemon.sandbox.boot import CLAIM_STEPS, POOL_STEPS, BootContext, BootExtension, run_boot
from daemon.sandbox.commands import SandboxCommands
from daemon.sandbox.diskquota import WorkspaceDisks
from daemon.sandbox.engine import ContainerInfo, ContainerSpec, RuntimeUnavailable, SandboxDriver
from daemon.sandbox.files import WorkspaceFiles
from daemon.sandbox.handle import Booting, Sandbox, SandboxParts
from daemon.sandbox.firewall import SandboxFirewall
from daemon.sandbox.network_pool import NetworkPool
from daemon.sandbox.lifecycle import SandboxLifecycle
from daemon.sandbox.models import BootFailure, ExecResult, Limits
from daemon.sandbox.pool import SandboxPool, Template, poolable, shape_key
from daemon.sandbox.host_workspace import HostWorkspace
from daemon.sandbox.runtime import (
    BackgroundTasks,
    LiveSandboxes,
    SandboxEvents,
    SandboxRuntime,
    evidence_root,
    iso,
    runtime_root,
    topic,
)
from daemon.sandbox.services import ServicePlan, plan_services
from daemon.store import sandboxes as sandbox_store
from daemon.util import new_id

if TYPE_CHECKING:
    from daemon.config import Settings
    from daemon.events import EventBus
    from daemon.store.db import Store
    from daemon.spec.models import SpecDocument

__all__ = ["BootExtension", "SandboxManager", "SandboxRuntime", "topic"]

log = logging.getLogger("svcd.sandbox")

RETRY_AFTER_S = 5


class SandboxManager:
    def __init__(self, settings: Settings, store: Store, events: EventBus, driver: SandboxDriver):
        self.settings = settings
        self.store = store
        self.events = events
        self.driver = driver  # the engine the app picked (engine/select.py)
        self.workspaces = HostWorkspace()
        self.daemon_id: str = settings.daemon_id
        self.extensions: list[BootExtension] = []
        self.live = LiveSandboxes(store)
        self.stream = SandboxEvents(events)
        self.tasks = BackgroundTasks()
        self._closing = False
        self.firewall = SandboxFirewall.from_settings(settings)
        if driver.runtime == "swarm":
            # a swarm's sandboxes are on internal overlays on the nodes: nothing on this host to firewall
            self.firewall.enabled = False
        self.disks = WorkspaceDisks(settings)
        self.networks = NetworkPool(driver, self.firewall, self.daemon_id, settings.network_pool_size)
        self.files = WorkspaceFiles(store, self.workspaces, self.live, self.tasks)
        self.commands = SandboxCommands(driver, store, self.stream, self.live, self.files.check_workspace_size)
        self.lifecycle = SandboxLifecycle(settings, store, self.stream, driver, self.firewall, self.disks, self.extensions,
                                          self.live, self.tasks, self.boot_context)
        self.pool = SandboxPool(settings, driver.runtime, self.live, self.tasks, self.pooled_runtime,
                                self._boot_pooled, self.lifecycle.teardown, driver.room_for)
        self.lifecycle.pooled = lambda: self.pool.owned() | self.networks.names()
        self.lifecycle.networks = self.networks
        self.parts = SandboxParts(self.commands, self.files, self.workspaces, driver, self.run_aux_container)

    async def _boot_pooled(self, sb: SandboxRuntime) -> None:
        await run_boot(self.boot_context(sb), POOL_STEPS)

    def boot_context(self, sb: SandboxRuntime) -> BootContext:
        """What the boot steps and the extensions' hooks get for `sb`."""
        return BootContext(sb=sb, driver=self.driver, store=self.store, settings=self.settings, firewall=self.firewall,
                           disks=self.disks, workspaces=self.workspaces, extensions=self.extensions, events=self.stream,
                           tasks=self.tasks, run_command=self.commands.run_command, watch_disk=self.files.watch_disk,
                           networks=self.networks)

    # --- where things live -------------------------------------------------------------------

    @property
    def runtime_root(self) -> Path:
        return runtime_root(self.settings)

    @property
    def evidence_root(self) -> Path:
        """Per-sandbox authoritative audit logs (audit.py). No container mounts anything here."""
        return evidence_root(self.settings)

    # --- create and boot ----------------------------------------------------------------------

    def live_count(self, tenant_id: str) -> int:
        return self.live.count(tenant_id)

    async def boot(
        self,
        tenant_id: str,
        *,
        spec: SpecDocument | None = None,
        spec_id: str | None = None,
        spec_version: int | None = None,
        image: str | None = None,
        services: list[str] | None = None,
        seed: str | None = None,
        timeout_s: float | None = None,
        metadata: dict[str, Any] | None = None,
        secrets: dict[str, str] | None = None,
        agent_bundle: Path | None = None,
        extra_env: dict[str, str] | None = None,
        shape: str = "B",
        required_env: list[str] | None = None,
        snapshot_egress: dict[str, list[Any]] | None = None,
    ) -> Booting:
        """A new sandbox whose boot is under way when this returns: `Booting.id` at once,
        `Booting.result()` once the boot ended (ready, or failed and torn down). Raises AtCapacity
        (503) when the tenant already has `settings.max_sandboxes` live ones, InvalidRequest for
        an unusable request; a failed boot does not raise (its result says the step and why)."""
        started = time.perf_counter()
        if self._closing:
            raise AtCapacity(0, RETRY_AFTER_S, what="sandbox (daemon shutting down)")
        limit = self.settings.max_sandboxes
        if self.live_count(tenant_id) >= limit:
            raise AtCapacity(limit, RETRY_AFTER_S)
        if not image and spec is not None:  # a Dockerfile base: the tag of its content digest (build.py)
            image = await spec_image(self.store, tenant_id, spec, spec_id, spec_version)
        if not image:
            raise InvalidRequest("a sandbox needs an image (shape A) or a spec (shape B)")
        if seed in (None, "") and spec is not None and spec.determinism is not None and spec.determinism.seed is not None:
            seed = str(spec.determinism.seed)  # the spec pins its sandboxes' seed unless the request gives one
        seed = str(seed) if seed not in (None, "") else "seed_" + pysecrets.token_hex(8)
        limits = _limits(spec, timeout_s)
        try:  # a bad service is a 400, pooled or not
            plan_services(spec.services if spec is not None else None, services, seed, self.runtime_root / "check")
        except ValueError as exc:
            raise InvalidRequest(str(exc), [{"loc": "services", "msg": str(exc)}])
        template = None
        if self.pool.enabled:
            template = await self._pool_template(tenant_id, shape, image, spec, spec_id, spec_version, services, limits,
                                                 agent_bundle is not None, snapshot_egress)
        sb = self.pool.take(template) if template is not None else None
        now = time.time()
        if sb is not None:
            # a pooled sandbox of this shape: the run's values are bound to it now (boot.CLAIM_STEPS)
            sb.tenant_id, sb.seed, sb.spec, sb.limits, sb.pooled, sb.state = tenant_id, seed, spec, limits, True, "creating"
            sb.spec_id, sb.spec_version, sb.created, sb.expires = spec_id, spec_version, now, now + limits.timeout
            sb.metadata, sb.provided_secrets, sb.extra_env = dict(metadata or {}), dict(secrets or {}), dict(extra_env or {})
            sb.required_env, sb.agent_bundle = list(required_env or []), Path(agent_bundle) if agent_bundle else None
            sb.snapshot_egress = dict(snapshot_egress or {})
            sandbox_id, plans = sb.id, sb.plans
        else:
            if template is not None:
                await self.pool.make_room()
            sandbox_id = new_id("sb-" if shape == "B" else "sbx_", 8)
            runtime_dir = self.runtime_root / sandbox_id
            try:
                plans = plan_services(spec.services if spec is not None else None, services, seed, runtime_dir / "mocks")
            except ValueError as exc:
                raise InvalidRequest(str(exc), [{"loc": "services", "msg": str(exc)}])
            sb = SandboxRuntime(
                id=sandbox_id, tenant_id=tenant_id, shape=shape, seed=seed, image=image, plans=plans, limits=limits,
                workspace=self.settings.workspaces_dir / sandbox_id, runtime_dir=runtime_dir, created=now,
                expires=now + limits.timeout, spec=spec, spec_id=spec_id, spec_version=spec_version,
                metadata=dict(metadata or {}), provided_secrets=dict(secrets or {}), extra_env=dict(extra_env or {}),
                required_env=list(required_env or []), agent_bundle=Path(agent_bundle) if agent_bundle else None,
                snapshot_egress=dict(snapshot_egress or {}),
            )
            sb.audit = self._audit_log(sb)
        sb.boot_started = started
        if self._closing or self.live_count(tenant_id) >= limit:  # the checks above were before an await
            if sb.pooled:  # claimed but not used: destroyed here, before shutdown could cancel a background teardown
                await asyncio.shield(self.lifecycle.teardown(sb))
            raise AtCapacity(limit, RETRY_AFTER_S)
        self.live.add(sb)  # reserves the capacity slot before the next await
        try:
            declared = list(spec.secrets) if spec is not None else []
            await sandbox_store.insert(self.store, {
                "id": sandbox_id, "tenant_id": tenant_id, "daemon_id": self.daemon_id, "shape": shape,
                "state": "creating", "image": image, "services": [p.name for p in plans], "seed": seed,
                "spec_id": spec_id, "spec_version": spec_version, "metadata": sb.metadata,
                "resources": limits.as_dict(), "secret_names": sorted(set(declared) | set(sb.provided_secrets)),
                "created_at": iso(now), "expires_at": iso(sb.expires),
            })
        except BaseException:
            self.live.remove(sandbox_id)
            if sb.pooled:
                self.spawn(self.lifecycle.teardown(sb))
            raise
        sb.expiry_task = self.spawn(self.lifecycle.expire(sb))
        sb.boot_task = self.spawn(self._boot(sb))
        return Booting(sb, self.parts)

    def _audit_log(self, sb: SandboxRuntime) -> AuditLog:
        return AuditLog(sb.id, self.evidence_root / sb.id / "audit.jsonl", partial(self._publish_audit, sb.id),
                        sb.secret_values, workspace=sb.workspace)

    def _publish_audit(self, sandbox_id: str, event: dict[str, Any]) -> None:
        self.events.publish(topic(sandbox_id), event)

    # --- the warm pool (pool.py) -----------------------------------------------------------------

    async def _pool_template(self, tenant_id: str, shape: str, image: str, spec: SpecDocument | None, spec_id: str | None,
                             spec_version: int | None, services: list[str] | None, limits: Limits, bundle: bool,
                             snapshot_egress: dict[str, list[Any]] | None) -> Template | None:
        """The request's pool shape, or None when such a sandbox is booted per run."""
        if not poolable(spec, self.driver.runtime):
            return None
        if isinstance(image, str) and foreign_build_tag(image, tenant_id):
            return None  # booted per run, where check_images refuses another tenant's built image (build.py)
        files: dict[str, dict[str, Any]] = {}
        if spec is not None and spec_id and spec_version and (is_build(spec) or any(getattr(f, "path", None) for f in spec.fixtures)):
            from daemon.store import specs as spec_store

            files = await spec_store.files(self.store, tenant_id, spec_id, spec_version)
        if not isinstance(image, str):  # a Dockerfile base (prewarm passes spec.base): its tag (build.py)
            image = await spec_image(self.store, tenant_id, spec, spec_id, spec_version)
        names = list(services or []) if spec is None else None
        key = shape_key(shape=shape, image=image, spec=spec, names=names, limits=limits, bundle=bundle,
                        snapshot_egress=snapshot_egress, fixture_files=files, runtime=self.driver.runtime)
        return Template(key=key, shape=shape, image=image, spec=spec, names=names, limits=limits, bundle=bundle,
                        snapshot_egress=dict(snapshot_egress or {}), fixture_files=files)

    async def prewarm(self, tenant_id: str, spec: SpecDocument, spec_id: str, spec_version: int, bundle: bool,
                      snapshot_egress: dict[str, list[Any]] | None, image: str | None = None) -> None:
        """Fill the pool for a queued run's sandbox (prewarm.py), the shape its create will ask for
        (`image`: an installed agent's layer instead of the spec's base)."""
        if self._closing or not self.pool.enabled:
            return
        # a Dockerfile base's image is the tag of its build (built or not yet), never the build block itself
        image = image or await spec_image(self.store, tenant_id, spec, spec_id, spec_version)
        template = await self._pool_template(tenant_id, "B", image, spec, spec_id, spec_version, None,
                                             _limits(spec, None), bundle, snapshot_egress)
        if template is not None:
            self.pool.prewarm(template)

    def pooled_runtime(self, template: Template) -> SandboxRuntime:
        """A sandbox to boot for the pool: no tenant, no secrets, a throwaway seed."""
        sandbox_id = new_id("sb-" if template.shape == "B" else "sbx_", 8)
        runtime_dir = self.runtime_root / sandbox_id
        seed = "pool_" + pysecrets.token_hex(8)
        spec = template.spec
        plans = plan_services(spec.services if spec is not None else None, template.names, seed, runtime_dir / "mocks")
        now = time.time()
        sb = SandboxRuntime(
            id=sandbox_id, tenant_id="", shape=template.shape, seed=seed, image=template.image, plans=plans,
            limits=template.limits, workspace=self.settings.workspaces_dir / sandbox_id, runtime_dir=runtime_dir,
            created=now, expires=now + template.limits.timeout, spec=spec, snapshot_egress=dict(template.snapshot_egress),
            fixture_files=template.fixture_files, state="pooled", pool_key=template.key,
        )
        sb.extension_state["pool"] = {"bundle": template.bundle, "names": template.names}
        sb.audit = self._audit_log(sb)
        return sb

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro)

    async def _boot(self, sb: SandboxRuntime) -> None:
        try:
            await run_boot(self.boot_context(sb), CLAIM_STEPS if sb.pooled else None)
        except BootFailure as failure:
            await self.lifecycle.fail(sb, failure.step, failure.message)
        except RuntimeUnavailable as exc:
            await self.lifecycle.fail(sb, "runtime", f"{exc}; is dockerd running? (`docker info`, or `bash .ci/docker.sh`)")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("boot of %s failed unexpectedly", sb.id)
            await self.lifecycle.fail(sb, "internal", f"unexpected error during boot: {type(exc).__name__}: {exc}")

    async def run_aux_container(self, sb: SandboxRuntime, spec: ContainerSpec, inspect: bool = True) -> ContainerInfo:
        """A helper container labelled as part of `sb` (removed with it): boot.BootContext's."""
        return await self.boot_context(sb).run_aux_container(sb, spec, inspect)

    # --- read --------------------------------------------------------------------------------

    def open(self, sandbox_id: str) -> Sandbox:
        """A handle on the live sandbox (handle.py). Raises NotFound when it is not live."""
        sb = self.live.get(sandbox_id)
        if sb is None:
            raise NotFound("sandbox", sandbox_id, f"sandbox '{sandbox_id}' is not running")
        return Sandbox(sb, self.parts)

    def runtime(self, sandbox_id: str) -> SandboxRuntime | None:
        """The live sandbox's in-memory record (None once stopped)."""
        return self.live.get(sandbox_id)

    def workspace_path(self, sandbox_id: str) -> Path:
        return self.settings.workspaces_dir / sandbox_id

    def audit_log(self, sandbox_id: str) -> AuditLog:
        sb = self.live.get(sandbox_id)
        if sb is None or sb.audit is None:
            raise NotFound("sandbox", sandbox_id, f"sandbox '{sandbox_id}' is not running")
        return sb.audit

    def secret_values(self, sandbox_id: str) -> dict[str, str]:
        sb = self.live.get(sandbox_id)
        return dict(sb.secrets) if sb is not None else {}

    def service_plan(self, sandbox_id: str, service: str) -> ServicePlan:
        sb = self.live.get(sandbox_id)
        if sb is None:
            raise NotFound("sandbox", sandbox_id, f"sandbox '{sandbox_id}' is not running")
        plan = next((p for p in sb.plans if p.name == service), None)
        if plan is None:
            raise NotFound("service", service, f"sandbox '{sandbox_id}' has no service '{service}'")
        return plan

    # --- the parts' operations -------------------------------------------------------------------

    async def start(self) -> dict[str, int]:
        """Reap what a previous run of this daemon left behind, then sweep every
        `settings.reap_interval_s` what no sandbox owns (lifecycle.py)."""
        reaped = await self.lifecycle.start()
        if self.settings.reap_interval_s > 0 and not self._closing:
            self.spawn(self.lifecycle.sweep_loop())
        return reaped

    async def shutdown(self) -> None:
        """Drain the pool, destroy every live sandbox, stop the background tasks and the engine."""
        self._closing = True
        await self.pool.close()
        await self.lifecycle.destroy_all("daemon_shutdown")
        await self.networks.close()
        self.tasks.cancel_all()
        if not self.live.ids():  # what a sandbox never recorded (created while the engine went away)
            leftover = await self.lifecycle.reap_engine()
            leftover["dirs"] = await asyncio.to_thread(self.lifecycle._sweep_dirs)
            if any(leftover.values()):
                log.info("removed at shutdown what no sandbox owned", extra=leftover)
        await self.driver.close()

    async def destroy(self, sandbox_id: str, reason: str = "deleted") -> None:
        await self.lifecycle.destroy(sandbox_id, reason)

    async def set_timeout(self, sandbox_id: str, seconds: float) -> None:
        """The remaining life, `seconds` from now. Raises Conflict when the sandbox is stopped."""
        await self.lifecycle.set_timeout(sandbox_id, seconds)

    async def exec(self, sandbox_id: str, command: str | list[str], *, timeout_s: float | None = None,
                   env: dict[str, str] | None = None, workdir: str = "/workspace", background: bool = False,
                   user: str | None = None, record: bool = True) -> ExecResult:
        return await self.commands.exec(sandbox_id, command, timeout_s=timeout_s, env=env, workdir=workdir,
                                        background=background, user=user, record=record)

    async def service_exec(self, sandbox_id: str, service: str, command: list[str], timeout_s: float = 30) -> ExecResult:
        return await self.commands.service_exec(sandbox_id, service, command, timeout_s)

    async def mock_requests(self, sandbox_id: str, service: str) -> list[dict[str, Any]]:
        return await self.commands.mock_requests(sandbox_id, service)

    async def stop_agent_leftovers(self, sandbox_id: str) -> int:
        return await self.commands.stop_agent_leftovers(sandbox_id)

    async def allow_agent_sessions(self, sandbox_id: str) -> None:
        await self.commands.allow_agent_sessions(sandbox_id)

    async def workspace_limit(self, sandbox_id: str) -> dict[str, Any] | None:
        return await self.files.workspace_limit(sandbox_id)

    async def state(self, sandbox_id: str) -> dict[str, Any]:
        return await self.files.state(sandbox_id)

    async def diff(self, sandbox_id: str) -> dict[str, Any]:
        return await self.files.diff(sandbox_id)

    async def write_file(self, sandbox_id: str, path: str, data: bytes) -> dict[str, Any]:
        return await self.files.write_file(sandbox_id, path, data)

    async def read_file(self, sandbox_id: str, path: str) -> bytes:
        return await self.files.read_file(sandbox_id, path)

    async def open_file(self, sandbox_id: str, path: str) -> tuple[int, int] | bytes:
        return await self.files.open_file(sandbox_id, path)

    async def delete_file(self, sandbox_id: str, path: str) -> None:
        await self.files.delete_file(sandbox_id, path)


def _limits(spec: SpecDocument | None, timeout_s: float | None) -> Limits:
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

