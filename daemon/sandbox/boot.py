"""The boot pipeline of a sandbox: named steps over one explicit `BootContext`.

`STEPS` runs in order (`run_boot`); each step is `async def step(ctx) -> None`, publishes its
progress on the lifecycle stream (`{"event_type": "status", "data": {...}}`, through
`ctx.progress(...)`) and fails the boot by raising `BootFailure(step, message)`; the manager turns
that into `state: error` with `error: {step, message}` and tears everything down.

    resolve_secrets    sent values + `dashboard` ones        status {step: secrets_resolved, count}   fails: secrets
    check_images       qualified, present or pullable; a Dockerfile base built (build.py)
                                                             status {step: image, line|built}         fails: image
    make_workspace     host dir (its own ext4 of resources.disk: diskquota.py), private dirs
                                                             status {step: workspace_created, ...}    fails: workspace
    create_network     one `internal` network, firewalled off from the host (firewall.py); an idle one of the
                       network pool when there is one (network_pool.py)
                                                             status {step: network_created, ...}      fails: network
    seed_workspace     base.build.image_workspace: the image's /workspace copied into the workspace
                                                             status {step: workspace_seeded, ms}      fails: workspace
    prepare_agent      agent env and container spec; extensions' on_network (may start helpers
                       such as proxies with `host.start_alongside`, not waited for here)
    start_containers   agent container, services and those helpers in parallel (each waited for)
                                                             status container_started, service_ready
    apply_fixtures     in order (fixtures.py)                status {step: fixture_applied, ...}      fails: fixtures
    open_services      extensions' on_services (e.g. the db audit's role and slot)                        fails: services
    check_required_env snapshot auth.required_env                                                     fails: required_env
    extract_bundle     agent bundle -> /agent                status {step: bundle_extracted}          fails: bundle
    run_setup          spec setup.commands                   status {step: setup_command, ...}        fails: setup
    mark_ready         workspace manifest, extensions' on_ready, row -> ready   status {state: ready}

A `BootExtension` hooks into the pipeline (register it with `manager.extensions.append(ext)`); its
hooks get the `BootContext` (typed as `BootHost`, what an extension may use) and the sandbox;
every hook is a no-op here, so a subclass overrides only what it needs. Raising BootFailure from
a hook fails the boot.
"""
from __future__ import annotations

import asyncio
import logging
import os
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine, Protocol

from daemon import auth
from daemon.sandbox import determinism as det
from daemon.sandbox import toolset
from daemon.sandbox.db_audit import needs_db_audit
from daemon.sandbox.diskquota import WorkspaceDisks
from daemon.sandbox.engine import ContainerInfo, ContainerSpec, ImageUnavailable, RuntimeUnavailable, SandboxDriver
from daemon.sandbox.firewall import FirewallError, SandboxFirewall
from daemon.sandbox.fixtures import FixtureHost, apply_fixture
from daemon.sandbox.host_workspace import HostWorkspace
from daemon.sandbox.models import BootFailure, ExecResult
from daemon.sandbox.network_pool import NetworkPool
from daemon.sandbox.runtime import BackgroundTasks, SandboxEvents, SandboxRuntime, all_or_nothing, sandbox_labels, tail
from daemon.sandbox.runtime import evidence_root as evidence_dir
from daemon.sandbox.secrets import SecretError
from daemon.sandbox.secrets import resolve_secrets as resolve_secret_values
from daemon.sandbox.services import ServicePlan, plan_services, wait_ready
from daemon.store import sandboxes as sandbox_store
from daemon.store.secrets import dashboard_secrets
from daemon.util import now_iso

if TYPE_CHECKING:
    from daemon.config import Settings
    from daemon.store.db import Store



class BootHost(FixtureHost, Protocol):
    """What the boot extensions' hooks may use (`BootContext` implements it)."""

    firewall: SandboxFirewall
    disks: WorkspaceDisks
    extensions: list[BootExtension]

    @property
    def daemon_id(self) -> str: ...
    @property
    def evidence_root(self) -> Path: ...
    def labels(self, sb: SandboxRuntime, role: str) -> dict[str, str]: ...
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...
    def start_alongside(self, sb: SandboxRuntime, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...
    async def run_aux_container(self, sb: SandboxRuntime, spec: ContainerSpec, inspect: bool = True) -> ContainerInfo: ...


class RunCommand(Protocol):
    """A command in the agent container (commands.py `SandboxCommands.run_command`)."""

    async def __call__(self, sb: SandboxRuntime, command: str | list[str], *, timeout_s: float,
                       env: dict[str, str] | None, workdir: str, user: str | None, background: bool, record: bool,
                       transition: bool) -> ExecResult: ...

log = logging.getLogger("svcd.sandbox")

# The agent container's keep-alive: the toolset's sleep (daemon/sandbox/toolset.py), which starts nothing.
AGENT_INIT = toolset.KEEP_ALIVE


class BootExtension:
    """A hook into the boot pipeline (network policy, the egress proxy and db audit, determinism, trace routing).
    Every hook does nothing here; override the ones you need.

      create_network(manager, sb) -> bool   create `sb.network` itself (e.g. with a fixed subnet)
                                            and return True; False lets the manager create it.
      on_network(manager, sb, agent)        after the network exists, before any container: may
                                            start helpers with `manager.run_aux_container(sb, spec)`
                                            (inside `manager.start_alongside(sb, coro)` so they start
                                            with the containers) and change the agent's
                                            ContainerSpec (env, binds, ...).
      on_service(manager, sb, plan, spec)   may change a service's ContainerSpec before it starts.
      on_services(manager, sb)              the services are up and the fixtures applied (a pooled
                                            sandbox: it has just been claimed); before the setup
                                            commands and the agent.
      on_ready(manager, sb)                 after the manifest is taken, just before `ready`.
      on_destroy(manager, sb)               first thing in teardown (containers still exist);
                                            runs after a failed boot too.
    """

    async def create_network(self, manager: "BootHost", sb: SandboxRuntime) -> bool:
        return False

    async def on_network(self, manager: "BootHost", sb: SandboxRuntime, agent: ContainerSpec) -> None:
        return None

    async def on_service(self, manager: "BootHost", sb: SandboxRuntime, plan: ServicePlan,
                         spec: ContainerSpec) -> None:
        return None

    async def on_services(self, manager: "BootHost", sb: SandboxRuntime) -> None:
        return None

    async def on_ready(self, manager: "BootHost", sb: SandboxRuntime) -> None:
        return None

    async def on_destroy(self, manager: "BootHost", sb: SandboxRuntime) -> None:
        return None


@dataclass
class BootContext:
    """What the boot steps and the extensions' hooks share: the sandbox being booted and the
    manager's collaborators, each given explicitly (the manager makes one per boot and teardown)."""

    sb: SandboxRuntime
    driver: SandboxDriver
    store: Store
    settings: Settings
    firewall: SandboxFirewall
    disks: WorkspaceDisks
    workspaces: HostWorkspace
    extensions: list[BootExtension]
    events: SandboxEvents
    tasks: BackgroundTasks
    run_command: RunCommand
    watch_disk: Callable[[SandboxRuntime], Coroutine[Any, Any, None]]
    networks: NetworkPool | None = None  # idle sandbox networks (network_pool.py); None: each boot makes its own
    agent_spec: ContainerSpec | None = None  # made by prepare_agent, started by start_containers

    @property
    def spec(self) -> Any:
        return self.sb.spec

    @property
    def daemon_id(self) -> str:
        return str(self.settings.daemon_id)

    @property
    def evidence_root(self) -> Path:
        return evidence_dir(self.settings)

    def progress(self, **data: object) -> None:
        """A `status` event of the sandbox being booted."""
        self.events.status(self.sb, **data)

    def status(self, sb: SandboxRuntime, **data: object) -> None:
        self.events.status(sb, **data)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro)

    def labels(self, sb: SandboxRuntime, role: str) -> dict[str, str]:
        return sandbox_labels(sb, self.daemon_id, role)

    def start_alongside(self, sb: SandboxRuntime, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `coro` (e.g. starting a proxy) while the boot goes on; the `start_containers` step
        waits for it with the agent and services, and a failed boot waits for it before teardown."""
        task = asyncio.get_running_loop().create_task(coro)
        sb.alongside.append(task)
        return task

    async def run_aux_container(self, sb: SandboxRuntime, spec: ContainerSpec, inspect: bool = True) -> ContainerInfo:
        """Start a helper container (e.g. an egress proxy) labelled as part of `sb`; it is removed
        with the sandbox."""
        spec.labels = {**spec.labels, **self.labels(sb, role=spec.labels.get("svc.role", "aux"))}
        info = await self.driver.run_container(spec, inspect=inspect)
        sb.aux.append(info)
        return info


Step = Callable[[BootContext], Awaitable[None]]


# --- the steps -----------------------------------------------------------------------------------


async def resolve_secrets(ctx: BootContext) -> None:
    sb = ctx.sb
    declared = dict(ctx.spec.secrets) if ctx.spec is not None else {}
    models = getattr(ctx.spec, "models", None)
    if models is not None:  # a run replaying recorded model answers: the gateway uses no provider key
        unsent = [p.key for p in models.providers.values() if p.key in declared and p.key not in (sb.provided_secrets or {})]
        if unsent and await _replays_models(ctx):
            for name in unsent:
                declared.pop(name, None)
    try:
        sb.secrets = await resolve_secret_values(
            declared, sb.provided_secrets,
            lambda: dashboard_secrets(ctx.store, sb.tenant_id),
        )
    except SecretError as exc:
        raise BootFailure("secrets", str(exc))
    if models is not None:  # a provider key goes to the model gateway only, never to the agent
        keys = {p.key for p in models.providers.values()}
        sb.model_keys = {name: sb.secrets.pop(name) for name in keys if name in sb.secrets}
    ctx.progress(step="secrets_resolved", count=len(sb.secrets) + len(sb.model_keys))


async def _replays_models(ctx: BootContext) -> bool:
    """Whether an extension (the model gateway) answers this sandbox's model calls from a recording."""
    for extension in ctx.extensions:
        replay_of = getattr(extension, "replay_of", None)
        if callable(replay_of) and await replay_of(ctx.sb):
            return True
    return False


async def check_images(ctx: BootContext) -> None:
    """Every image is fully qualified and present (or pullable)."""
    from daemon.spec.types import check_image_ref

    from daemon.sandbox.build import foreign_build_tag, literal_refusal, pull_refusal

    sb = ctx.sb
    refs = [("base image", sb.image)] + [(f"service '{p.name}' image", p.image) for p in sb.plans]
    for what, ref in refs:
        try:
            check_image_ref(ref)
        except ValueError as exc:
            raise BootFailure("image", f"{what}: {exc}")
        # a built image is its tenant's own (build.py tags it under the tenant); an address literal is never pulled
        if sb.tenant_id and foreign_build_tag(ref, sb.tenant_id):  # a pool's sandbox (no tenant yet): manager.py
            raise BootFailure("image", f"{what} {ref} is not one of this tenant's built images (a Dockerfile base is "
                                       "named by its spec: base: {build: ...})")
        literal = literal_refusal(ref)
        if literal:
            raise BootFailure("image", f"{what} {ref}: {literal}; images come from this engine or an allowed registry")

    async def ensure(what: str, ref: str) -> None:
        from daemon.sandbox.images import STOCK_IMAGES

        refusal = pull_refusal(ref, ctx.settings)
        if refusal and ctx.driver.runtime == "docker" and not await ctx.driver.has_image(ref):
            hint = "run `svc images build`" if ref in STOCK_IMAGES else "build or load it on this engine"
            raise BootFailure("image", f"{what} {ref}: {refusal}; {hint}")
        try:
            await ctx.driver.ensure_image(ref)
        except ImageUnavailable:
            hint = "run `svc images build`" if ref in STOCK_IMAGES else "build it (or `docker pull` it where a registry is reachable)"
            # the engine's words are not repeated: they may quote whatever the registry's address answered
            raise BootFailure("image", f"{what} {ref} not found locally and could not be pulled; {hint}")

    from daemon.sandbox.build import ensure_spec_image

    # a Dockerfile base is built here (build.py), and then found like any other image
    await ensure_spec_image(settings=ctx.settings, store=ctx.store, sb=sb, progress=ctx.progress, runtime=ctx.driver.runtime)
    seen: dict[str, str] = {}
    for what, ref in refs:
        seen.setdefault(ref, what)
    await all_or_nothing([ensure(what, ref) for ref, what in seen.items()])


async def make_workspace(ctx: BootContext) -> None:
    """The workspace (its own filesystem of resources.disk bytes) and the private directories.
    A cancelled boot does not stop the thread: teardown waits for it before unmounting."""
    sb = ctx.sb
    job = sb.workspace_job = asyncio.ensure_future(asyncio.to_thread(_make_dirs, ctx, sb))
    job.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved even when nobody awaits it
    took = await asyncio.shield(job)
    ctx.progress(step="workspace_created", disk_limit=sb.limits.disk, enforced=sb.disk_mounted, ms=int(took * 1000))
    if sb.disk_mounted:
        sb.disk_watch = ctx.spawn(ctx.watch_disk(sb))


async def create_network(ctx: BootContext) -> None:
    """One `internal` network (an extension may create it itself), firewalled off from the host
    before any container joins it."""
    sb = ctx.sb
    sb.network = f"svc-{sb.id}"
    created = False
    for ext in ctx.extensions:
        if await ext.create_network(ctx, sb):
            created = True
            break
    if not created and ctx.networks is not None and ctx.networks.enabled:
        try:  # one the last sandbox gave back, already firewalled; else a new one for the pool
            sb.network = await ctx.networks.take()
        except RuntimeUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - named as the firewall step's failure is
            raise _firewall_failure(exc, sb.network) from None
        sb.network_pooled = True
        ctx.progress(step="network_created", host_firewall=ctx.firewall.enabled, pooled=True)
        return
    if not created:
        await ctx.driver.create_network(sb.network, ctx.labels(sb, role="network"), internal=True)
    await _protect_network(ctx)
    ctx.progress(step="network_created", host_firewall=ctx.firewall.enabled)


def build_option(sb: SandboxRuntime, name: str) -> bool:
    """A boolean of the spec's base.build (False for an image base or no spec)."""
    base = getattr(sb.spec, "base", None) if sb.spec is not None else None
    return bool(getattr(getattr(base, "build", None), name, False))


SEED_MOUNT = "/.svc-seed"
# The image's /workspace entries (not its .svc: the daemon's) copied with the toolset's busybox, which
# follows no link: a link stays a link in the workspace, read by the daemon as the agent's links are
SEED_SH = (f"[ -d /workspace ] || exit 0; cd /workspace || exit 1; for f in * .[!.]* ..?*; do "
           f"{{ [ -e \"$f\" ] || [ -L \"$f\" ]; }} || continue; [ \"$f\" = .svc ] && continue; "
           f"{toolset.MOUNT}/busybox cp -a \"./$f\" {SEED_MOUNT}/ || exit 1; done")


async def seed_workspace(ctx: BootContext) -> None:
    """base.build.image_workspace: what the image holds under /workspace (a Harbor task's WORKDIR
    /workspace/app), which the workspace's mount hides from the agent, copied into the workspace by a
    one-off container of the image with the workspace mounted elsewhere. It runs only the toolset's
    busybox (no program of the image), as root (ownership kept), on the sandbox's network, limits
    and disk quota; the daemon reads nothing of the image itself. Before the agent container starts,
    so its ENTRYPOINT sees the files; before the manifest, so they are no change of the agent's."""
    sb = ctx.sb
    if not build_option(sb, "image_workspace"):
        return
    started = time.perf_counter()
    tools = await asyncio.to_thread(toolset.host_dir, ctx.settings.home)
    spec = ContainerSpec(
        name=f"svc-{sb.id}-seed", image=sb.image, entrypoint=[toolset.SH, "-c", SEED_SH], env=toolset.trusted_env(),
        labels=ctx.labels(sb, role="seed"), network=sb.network, user="0", init=True,
        binds={str(sb.workspace): (SEED_MOUNT, "rw"), str(tools): (toolset.MOUNT, "ro")},
        nano_cpus=int(sb.limits.cpus * 1e9), mem_limit=sb.limits.memory, pids_limit=sb.limits.pids,
    )
    info = await ctx.run_aux_container(sb, spec, inspect=False)
    try:
        deadline = time.monotonic() + max(60.0, sb.expires - time.time())
        while True:
            state = await ctx.driver.container_state(info.id) or {}
            if state.get("Status") in ("exited", "dead") or not state:
                break
            if time.monotonic() > deadline:
                raise BootFailure("image_workspace", "copying the image's /workspace into the workspace did not finish in time")
            await asyncio.sleep(0.1)
        if state.get("ExitCode") != 0:
            out = tail(await ctx.driver.logs(info.id, tail=5))
            raise BootFailure("image_workspace", "cannot copy the image's /workspace into the workspace (base.build."
                                           f"image_workspace; is resources.disk large enough?): {out}")
    finally:
        try:
            await ctx.driver.remove_container(info.id)
            sb.aux[:] = [c for c in sb.aux if c.id != info.id]
        except Exception as exc:  # noqa: BLE001 - the sandbox's teardown removes it with the rest
            log.warning("cannot remove the workspace seed container %s: %s", info.id[:12], exc)
    ctx.progress(step="workspace_seeded", ms=int((time.perf_counter() - started) * 1000))


def agent_base_env(sb: SandboxRuntime, token: str | None) -> dict[str, str]:
    """The agent's environment before the extensions: services, the spec's agent.env, the
    request's env, the sandbox's id and (token given: bound to a run) its token and seed. A pooled
    sandbox is created with `token=None` and no services' values, which depend on the seed."""
    env: dict[str, str] = {}
    if token is not None:
        audited = needs_db_audit(sb.spec)
        for plan in sb.plans:
            env.update(plan.audited_env if audited and plan.audited_env else plan.agent_env)
    if sb.spec is not None and sb.spec.agent is not None:
        env.update(sb.spec.agent.env)
    env.update(sb.extra_env)
    env["SERVICE_SANDBOX_ID"] = sb.id
    if token is not None:
        env.update({"SERVICE_SANDBOX_TOKEN": token, "SERVICE_SEED": sb.seed})
    return env


def determinism_env(sb: SandboxRuntime, env: dict[str, str]) -> dict[str, str]:
    """The spec's determinism (seed- and clock-derived) environment on top of `env`; per run."""
    determinism = sb.spec.determinism if sb.spec is not None else None
    if determinism is None:
        return {}
    try:
        return det.plan(determinism, sb.seed, env).env
    except det.DeterminismUnavailable as exc:
        raise BootFailure("determinism", str(exc))


def has_bundle(sb: SandboxRuntime) -> bool:
    """Whether /agent is mounted: the run brings a bundle, or the pool shape is one that will."""
    return sb.agent_bundle is not None or bool(sb.extension_state.get("pool", {}).get("bundle"))


async def prepare_agent(ctx: BootContext) -> None:
    """The agent's environment and container spec; then every extension's on_network. A pooled
    sandbox (`sb.pool_key` set) gets nothing of a run: no token, seed, services' credentials or
    determinism values; `bind_run` gives those to every exec once it is claimed."""
    sb = ctx.sb
    pooling = sb.pool_key is not None and not sb.pooled
    token = None if pooling else await auth.create_sandbox_token(ctx.store, sb.tenant_id, sb.id)
    env = agent_base_env(sb, token)
    before = dict(env)
    try:
        tools = await asyncio.to_thread(toolset.host_dir, ctx.settings.home)
    except toolset.ToolsetUnavailable as exc:
        raise BootFailure("toolset", str(exc)) from None
    binds = {str(sb.workspace): ("/workspace", "rw"), str(tools): (toolset.MOUNT, "ro")}
    if has_bundle(sb):
        # read-only: /agent is a host directory outside the workspace's disk quota
        binds[str(sb.runtime_dir / "agent")] = ("/agent", "ro")
    # base.build.image_entrypoint: the image's ENTRYPOINT (if any) starts the container in its WORKDIR with the
    # keep-alive as its arguments, as Harbor starts it with `sleep infinity`; the reaper spares it and what it
    # started itself, as the keep-alive's (leftovers.py); otherwise the keep-alive replaces the ENTRYPOINT
    own = build_option(sb, "image_entrypoint")
    agent = ctx.agent_spec = ContainerSpec(
        name=f"svc-{sb.id}-agent", image=sb.image, entrypoint=None if own else AGENT_INIT, command=AGENT_INIT if own else None,
        env=env, labels=ctx.labels(sb, role="agent"), network=sb.network, aliases=["sandbox"], binds=binds,
        working_dir=None if own else "/workspace", hostname="sandbox", init=True, nano_cpus=int(sb.limits.cpus * 1e9),
        mem_limit=sb.limits.memory, pids_limit=sb.limits.pids,
    )
    for ext in ctx.extensions:
        await ext.on_network(ctx, sb, agent)
    if pooling:
        # what the extensions set (proxy, tracing): bind_run lays it over the run's own values
        sb.extension_state.setdefault("pool", {})["ext_env"] = {k: v for k, v in agent.env.items() if before.get(k) != v}
        return
    agent.env.update(determinism_env(sb, agent.env))
    sb.agent_env = agent.env


async def bind_run(ctx: BootContext) -> None:
    """A pooled sandbox claimed by a run: its token, the services' seed-derived credentials (a
    postgres password is changed to the run's), and the run's agent environment, which every exec
    carries (`sb.run_env`) since the container was created before the run."""
    sb = ctx.sb
    try:
        plans = plan_services(ctx.spec.services if ctx.spec is not None else None, sb.extension_state["pool"].get("names"),
                              sb.seed, sb.runtime_dir / "mocks")
    except ValueError as exc:
        raise BootFailure("services", str(exc))
    for old, new in zip(sb.plans, plans):
        if new.type == "postgres" and new.env.get("POSTGRES_PASSWORD") != old.env.get("POSTGRES_PASSWORD"):
            await _set_postgres_password(ctx, new)
    sb.plans = plans
    token = await auth.create_sandbox_token(ctx.store, sb.tenant_id, sb.id)
    env = agent_base_env(sb, token)
    env.update(sb.extension_state["pool"].get("ext_env") or {})
    env.update(determinism_env(sb, env))
    sb.agent_env = sb.run_env = env
    ctx.progress(step="claimed", pooled=True)


async def _set_postgres_password(ctx: BootContext, plan: ServicePlan) -> None:
    user, password = plan.user or "postgres", plan.env["POSTGRES_PASSWORD"]
    quoted = user.replace('"', '""')
    sql = f"ALTER USER \"{quoted}\" WITH PASSWORD '{password}'"  # the password is hex (models.derive)
    raw = await ctx.driver.exec(ctx.sb.services[plan.name].id, ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-U", user,
                                                                 "-d", plan.database or "postgres", "-c", sql], watchdog_s=60)
    if raw.exit_code != 0:
        raise BootFailure("services", f"service '{plan.name}': cannot set the run's password: "
                                      f"{tail(raw.stderr.decode('utf-8', 'replace'))}")


async def start_containers(ctx: BootContext) -> None:
    """The agent container and every service, in parallel; each service waited for."""
    sb, driver = ctx.sb, ctx.driver
    assert ctx.agent_spec is not None, "prepare_agent runs first"
    agent_spec = ctx.agent_spec

    async def start_agent() -> None:
        sb.agent_spec = agent_spec
        sb.agent = await driver.run_container(agent_spec)
        ctx.progress(step="container_started", runtime=driver.runtime)
        warm = getattr(driver, "warm_layers", None)  # the tamper check's diff, read after the agent (verifier.py)
        if warm is not None:
            ctx.spawn(warm(sb.agent.id))

    async def start_service(plan: ServicePlan) -> None:
        spec = ContainerSpec(
            name=f"svc-{sb.id}-{plan.name}", image=plan.image, command=plan.command, entrypoint=plan.entrypoint,
            env=dict(plan.env), labels={**ctx.labels(sb, role="service"), "svc.service": plan.name},
            network=sb.network, aliases=[plan.name], binds=dict(plan.binds), init=True, hostname=plan.name,
        )
        for ext in ctx.extensions:
            await ext.on_service(ctx, sb, plan, spec)
        info = await driver.run_container(spec, inspect=True)
        sb.services[plan.name] = info
        waited = await wait_ready(driver, plan, info)
        ctx.progress(step="service_ready", service=plan.name, waited_ms=int(waited * 1000))

    async def alongside(task: asyncio.Task[Any]) -> None:
        await task

    await all_or_nothing([start_agent(), *(start_service(p) for p in sb.plans), *(alongside(t) for t in sb.alongside)])


async def apply_fixtures(ctx: BootContext) -> None:
    if ctx.spec is None:
        return
    for index, fixture in enumerate(ctx.spec.fixtures):
        await apply_fixture(ctx, ctx.sb, index, fixture)


async def open_services(ctx: BootContext) -> None:
    """Every extension's on_services: the services are up, the fixtures applied, the run bound."""
    for ext in ctx.extensions:
        await ext.on_services(ctx, ctx.sb)


async def check_required_env(ctx: BootContext) -> None:
    """The agent snapshot's `auth.required_env` are all provided (agent env or secrets)."""
    sb = ctx.sb
    missing = [name for name in sb.required_env if not (sb.agent_env.get(name) or sb.secrets.get(name))]
    if missing:
        several = len(missing) > 1
        raise BootFailure("required_env", (
            f"the agent snapshot requires environment variable{'s' if several else ''} "
            f"{', '.join(repr(m) for m in missing)} (auth.required_env) but the sandbox does not provide "
            f"{'them' if several else 'it'}; declare {'them' if several else 'it'} under the spec's "
            "secrets: (or agent.env) or pass the value in the request's secrets"))


async def extract_bundle(ctx: BootContext) -> None:
    sb = ctx.sb
    if sb.agent_bundle is None:
        return
    await asyncio.to_thread(_extract_bundle, sb.agent_bundle, sb.runtime_dir / "agent")
    ctx.progress(step="bundle_extracted")


async def run_setup(ctx: BootContext) -> None:
    sb = ctx.sb
    if ctx.spec is None:
        return
    for command in ctx.spec.setup.commands:
        remaining = max(1.0, sb.expires - time.time())
        result = await ctx.run_command(sb, command, timeout_s=remaining, env=None, workdir="/workspace",
                                               user=None, background=False, record=True, transition=False)
        ctx.progress(step="setup_command", command=command, exit_code=result.exit_code)
        if result.exit_code != 0:
            why = "timed out" if result.timed_out else f"exited with {result.exit_code}"
            out = tail(result.stderr or result.stdout)
            raise BootFailure("setup", f"setup command `{command}` {why}" + (f"; output:\n{out}" if out else "")
                              + "\nfix the command in the spec's setup.commands")


async def mark_ready(ctx: BootContext) -> None:
    """The workspace manifest (what `diff` compares against), the extensions' on_ready, ready."""
    sb = ctx.sb
    sb.manifest = await ctx.workspaces.manifest(sb.workspace)
    sb.manifest_taken_at = now_iso()
    for ext in ctx.extensions:
        await ext.on_ready(ctx, sb)
    # where the agent's audit window can start at the earliest (an `effects` check reads from it
    # when the runner does not give it the window: daemon/scoring/checks/context.py)
    audit = getattr(sb, "audit", None)
    sb.ready_audit_mark = audit.mark() if audit is not None else 0
    sb.state = "ready"
    took_ms = round((time.perf_counter() - sb.boot_started) * 1000, 1) if sb.boot_started else 0.0
    sb.node = ctx.driver.node_of(sb.agent.id) if sb.agent is not None else None
    await sandbox_store.update(ctx.store, sb.id, state="ready", ready_at=now_iso(), boot_pooled=int(sb.pooled),
                               boot_ms=took_ms, node=sb.node)
    ctx.progress(state="ready")


STEPS: list[Step] = [
    resolve_secrets, check_images, make_workspace, create_network, seed_workspace, prepare_agent, start_containers,
    apply_fixtures, open_services, check_required_env, extract_bundle, run_setup, mark_ready,
]
# The warm pool (pool.py) splits them: what depends only on the sandbox's shape runs ahead of any
# run; what belongs to the run (secrets, token, seed, bundle, setup commands) once it is claimed.
POOL_STEPS: list[Step] = [check_images, make_workspace, create_network, seed_workspace, prepare_agent, start_containers,
                          apply_fixtures]
CLAIM_STEPS: list[Step] = [resolve_secrets, bind_run, open_services, check_required_env, extract_bundle, run_setup, mark_ready]


async def run_boot(ctx: BootContext, steps: list[Step] | None = None) -> None:
    """Run the boot steps in order; the first BootFailure (or any other exception) propagates."""
    sb = ctx.sb
    audit, spec = getattr(sb, "audit", None), getattr(sb, "spec", None)
    if audit is not None and spec is not None:
        # the spec's audit switches decide what the stream, the workspace copy and the trajectory
        # show; the daemon's evidence keeps every event (daemon.sandbox.audit)
        audit.apply_switches(spec.audit)
    try:
        for step in steps if steps is not None else STEPS:
            started = time.perf_counter()
            await step(ctx)
            sb.boot_steps_ms[step.__name__] = int((time.perf_counter() - started) * 1000)
    finally:
        # helpers still starting (a step failed first): settled before teardown looks for containers
        pending = [t for t in sb.alongside if not t.done()] if hasattr(sb, "alongside") else []
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for task in getattr(sb, "alongside", []):
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: the failure that matters already propagates


# --- pieces of the steps -------------------------------------------------------------------------


async def _protect_network(ctx: BootContext) -> None:
    """Firewall the sandbox network off from the host (firewall.py), before any container joins
    it. Fails the boot when that is not possible."""
    sb = ctx.sb
    if not ctx.firewall.enabled:
        if ctx.driver.runtime != "swarm":  # a swarm's sandboxes are isolated by internal overlays on the nodes
            log.warning("sandbox %s boots without the host firewall (SERVICE_SANDBOX_FIREWALL=off): its containers "
                        "can connect to services on this host", sb.id)
        return
    sb.firewalled = True  # teardown removes whatever was installed
    assert sb.network is not None, "create_network names it first"
    try:
        bridge = await ctx.driver.network_bridge(sb.network)
        await ctx.firewall.protect(bridge, sb.id, ctx.daemon_id)
    except RuntimeUnavailable:
        raise
    except Exception as exc:
        raise _firewall_failure(exc, sb.network) from None


def _firewall_failure(exc: Exception, network: str) -> BootFailure:
    what = str(exc) if isinstance(exc, FirewallError) else f"cannot make or find the bridge of {network}: {exc}"
    return BootFailure("network", (
        f"cannot firewall the sandbox network off from this host: {what}. The daemon needs root (CAP_NET_ADMIN) "
        "and iptables (SERVICE_IPTABLES names the binary); to boot sandboxes without this protection set "
        "SERVICE_SANDBOX_FIREWALL=off (their containers can then connect to services on this host)"))


def _make_dirs(ctx: BootContext, sb: SandboxRuntime) -> float:
    """Returns the seconds the workspace took (its filesystem: diskquota.py)."""
    started = time.perf_counter()
    sb.workspace.mkdir(parents=True, exist_ok=True)
    if ctx.disks.enabled:
        ctx.disks.attach(sb.id, sb.workspace, sb.limits.disk)  # BootFailure("workspace", ...) names the step
        sb.disk_mounted = True
    took = time.perf_counter() - started
    os.chmod(sb.workspace, 0o777)  # the agent may run as any user in its image
    (sb.workspace / ".svc").mkdir(exist_ok=True)
    evidence = ctx.evidence_root
    evidence.mkdir(mode=0o700, exist_ok=True)
    (evidence / sb.id).mkdir(mode=0o700, exist_ok=True)
    sb.runtime_dir.mkdir(parents=True, exist_ok=True)
    for plan in sb.plans:
        if plan.type == "http_mock":
            (sb.runtime_dir / "mocks" / plan.name).mkdir(parents=True, exist_ok=True)
    if has_bundle(sb):
        (sb.runtime_dir / "agent").mkdir(exist_ok=True)
    return took


BUNDLE_UNPACKED_CAP = 1024 * 1024 * 1024  # what one bundle may unpack to on the host
BUNDLE_MEMBERS_CAP = 100_000


def _extract_bundle(bundle: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(bundle, "r:*") as tar:
            total = count = 0
            for member in tar:  # sizes from the headers, before anything is written
                total += max(member.size, 0)
                count += 1
                if total > BUNDLE_UNPACKED_CAP or count > BUNDLE_MEMBERS_CAP:
                    raise BootFailure("bundle", f"the agent bundle {bundle.name} unpacks to more than "
                                                f"{BUNDLE_UNPACKED_CAP // 1024**2} MiB or {BUNDLE_MEMBERS_CAP} files")
            tar.extractall(target, filter="data")
    except (tarfile.TarError, OSError) as exc:
        raise BootFailure("bundle", f"cannot extract the agent bundle {bundle.name}: {exc}")
