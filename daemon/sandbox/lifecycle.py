"""The lifecycle of sandboxes after boot: expiry, destroy and teardown (extensions' on_destroy,
containers, network, host firewall rules, token, directories), the end of a failed boot, and the
reaping of what a previous run of this daemon left behind: `SandboxLifecycle`, a part of
`SandboxManager` sharing its registry of live sandboxes."""
from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

from daemon.sandbox.audit import redact
from daemon.sandbox.boot import BootContext, BootExtension
from daemon.sandbox.diskquota import WorkspaceDisks
from daemon.sandbox.engine import RuntimeUnavailable, SandboxDriver
from daemon.sandbox.firewall import FirewallError, SandboxFirewall
from daemon.sandbox.network_pool import NetworkPool
from daemon.sandbox.models import BootFailure
from daemon.sandbox.runtime import (
    BackgroundTasks,
    LiveSandboxes,
    SandboxEvents,
    SandboxRuntime,
    evidence_root,
    iso,
    rmtree,
    runtime_root,
)
from daemon.store import sandboxes as sandbox_store
from daemon.util import now_iso

if TYPE_CHECKING:
    from daemon.config import Settings
    from daemon.store.db import Store

log = logging.getLogger("svcd.sandbox")


class SandboxLifecycle:
    """Expiry, destroy, teardown and reaping. `host(sb)` makes the context the extensions'
    `on_destroy` hooks get (the manager's `boot_context`)."""

    def __init__(self, settings: Settings, store: Store, events: SandboxEvents, driver: SandboxDriver,
                 firewall: SandboxFirewall, disks: WorkspaceDisks, extensions: list[BootExtension],
                 live: LiveSandboxes, tasks: BackgroundTasks, host: Callable[[SandboxRuntime], BootContext]):
        self.settings = settings
        self.store = store
        self.events = events
        self.driver = driver
        self.firewall = firewall
        self.disks = disks
        self.extensions = extensions  # the manager's list: extensions registered later count too
        self.live = live
        self.tasks = tasks
        self.host = host
        self.daemon_id: str = settings.daemon_id
        # the ids of pooled sandboxes (ready or booting) and pooled networks: set by the manager
        self.pooled: Callable[[], set[str]] = set
        self.networks: NetworkPool | None = None  # where a pooled network goes back (network_pool.py)

    # --- reaping ---------------------------------------------------------------------------------

    async def start(self) -> dict[str, int]:
        """Mark sandboxes a previous run of this daemon left behind as stopped, then remove every
        container and network labelled with this daemon's id (none of them is live yet), and the
        host firewall rules of sandboxes that are gone."""
        if not self.firewall.enabled and self.driver.runtime != "swarm":
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
        reaped = {"rows": len(ids), **await self.reap_engine()}
        if any(reaped.values()):
            log.info("reaped orphans of a previous run", extra=reaped)
        return reaped

    async def reap_engine(self) -> dict[str, int]:
        """Remove every container, network and volume labelled with this daemon's id, and the host
        firewall rules of sandboxes that are not live. Only where no sandbox of this daemon is live:
        at start, and at a clean stop after every live sandbox was destroyed, so what was created
        while the engine was going away (and never recorded as a sandbox's) is removed too."""
        return await self._reap(set(), 0.0)

    def owned(self) -> set[str]:
        """The sandboxes whose engine objects and directories are in use: live (booting, ready,
        running, being destroyed) and pooled (ready or booting)."""
        return set(self.live.ids()) | self.pooled()

    async def sweep(self) -> dict[str, int]:
        """The periodic sweep: this daemon's containers, networks and volumes whose `svc.sandbox` no
        live, booting or pooled sandbox is and that are older than `settings.reap_grace_s`, those
        sandboxes' host directories and workspace filesystems, and their host firewall rules.
        What a sandbox left while the engine was restarting or unreachable goes here, not only at
        the next start or stop."""
        reaped = await self._reap(None, float(self.settings.reap_grace_s))
        if any(reaped.values()):
            log.info("the sweep removed what no sandbox owned", extra=reaped)
        return reaped

    async def sweep_loop(self) -> None:
        interval = float(self.settings.reap_interval_s)
        while interval > 0:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next sweep tries again
                log.exception("the periodic sweep failed")

    async def _reap(self, owned: set[str] | None, grace_s: float) -> dict[str, int]:
        """`owned` None: asked after the engine listed its objects (an object listed belongs to a
        sandbox that existed then: one still owned is spared, one that ended meanwhile was being
        removed by its own teardown anyway)."""
        reaped = {"containers": 0, "networks": 0, "volumes": 0, "firewall_rules": 0, "dirs": 0}
        labels = {"svc.daemon": self.daemon_id}
        try:
            containers, networks = await self.driver.list_labelled(labels)
            volumes = await self.driver.list_volumes(labels)
        except RuntimeUnavailable as exc:
            log.warning("not reaping orphans: %s", exc)
            return reaped
        except Exception as exc:  # noqa: BLE001 - an engine going away mid-listing: the next sweep
            log.warning("not reaping orphans: cannot list this daemon's engine objects: %s", exc)
            return reaped
        if owned is None:
            owned = self.owned()
        now = time.time()
        containers, networks, volumes = (
            [o for o in objects if unowned(o, owned, now, grace_s)] for objects in (containers, networks, volumes))
        results = await asyncio.gather(*(self.driver.remove_container(c["Id"]) for c in containers), return_exceptions=True)
        reaped["containers"] = sum(1 for r in results if not isinstance(r, BaseException))
        results = await asyncio.gather(*(self.driver.remove_network(n["Id"]) for n in networks), return_exceptions=True)
        reaped["networks"] = sum(1 for r in results if not isinstance(r, BaseException))
        results = await asyncio.gather(*(self.driver.remove_volume(v["Name"]) for v in volumes), return_exceptions=True)
        reaped["volumes"] = sum(1 for r in results if not isinstance(r, BaseException))
        # what owns a rule is asked again once the rules are listed: one installed meanwhile (a sandbox
        # booting, a network taken from the pool during the sweep) is never removed
        reaped["firewall_rules"] = await self._reap_firewall(self.owned if grace_s > 0 else owned)
        if grace_s > 0:  # at start and stop the caller removes the directories
            reaped["dirs"] = await asyncio.to_thread(self._sweep_dirs, owned, grace_s)
        return reaped

    async def destroy_all(self, reason: str) -> None:
        await asyncio.gather(*(self.destroy(i, reason) for i in self.live.ids()), return_exceptions=True)

    def _sweep_dirs(self, owned: set[str] | None = None, grace_s: float = 0.0) -> int:
        """Workspaces (their filesystems unmounted and images deleted first), runtime and evidence
        directories of sandboxes that are not `owned` (default: not live) and were last changed
        more than `grace_s` ago (a crash between creating a directory and recording the sandbox can
        leave one behind). Returns how many directories were removed."""
        live = set(self.live.ids()) if owned is None else owned
        released = self.disks.reap(live)
        if released:
            log.info("unmounted %d leftover workspace filesystem(s)", released)
        removed = 0
        cutoff = time.time() - grace_s
        for root in (self.settings.workspaces_dir, runtime_root(self.settings), evidence_root(self.settings)):
            try:
                entries = list(root.iterdir())
            except FileNotFoundError:
                continue
            for entry in entries:
                if entry.is_dir() and entry.name not in live and entry.name.startswith(("sb-", "sbx_")):
                    if grace_s > 0:
                        try:
                            if entry.stat().st_mtime > cutoff:
                                continue
                        except FileNotFoundError:
                            continue
                    rmtree(entry)
                    removed += 1
        return removed

    def _remove_dirs(self, ids: list[str]) -> None:
        for sandbox_id in ids:
            self.disks.detach(sandbox_id, self.settings.workspaces_dir / sandbox_id)
            rmtree(self.settings.workspaces_dir / sandbox_id)
            rmtree(runtime_root(self.settings) / sandbox_id)
            rmtree(evidence_root(self.settings) / sandbox_id)


    async def _reap_firewall(self, owned: set[str] | Callable[[], set[str]]) -> int:
        if not self.firewall.enabled:
            return 0
        try:
            return await self.firewall.reap(self.daemon_id, owned)
        except FirewallError as exc:
            log.warning("cannot remove leftover host firewall rules of sandboxes: %s", exc)
            return 0

    async def fail(self, sb: SandboxRuntime, step: str, message: str) -> None:
        """The end of a failed boot: state `error` with the step and message, then torn down."""
        message = redact(message, sb.secret_values())
        log.info("sandbox %s failed to boot at %s: %s", sb.id, step, message.splitlines()[0] if message else "")
        sb.state = "error"
        sb.boot_failure = BootFailure(step, message)
        await sandbox_store.update(self.store, sb.id, state="error", error_step=step, error_message=message)
        self.events.status(sb, state="error", step=step, message=message)
        if sb.expiry_task is not None and sb.expiry_task is not asyncio.current_task():
            sb.expiry_task.cancel()
        await self.teardown(sb)
        await sandbox_store.update(self.store, sb.id, stopped_at=now_iso(), stop_reason="boot_failed")
        self._finish(sb)

    # --- destroy -----------------------------------------------------------------------------

    async def destroy(self, sandbox_id: str, reason: str = "deleted") -> None:
        """Stop the sandbox and release everything (containers, network, workspace, token).
        Cancels a boot in progress. A sandbox that is already stopped (or failed) is left as is."""
        sb = self.live.get(sandbox_id)
        if sb is None:
            return
        async with sb.destroy_lock:
            if sandbox_id not in self.live:
                return
            current = asyncio.current_task()
            if sb.boot_task is not None and not sb.boot_task.done() and sb.boot_task is not current:
                sb.boot_task.cancel()
                try:
                    await sb.boot_task
                except BaseException:
                    pass
                if sandbox_id not in self.live:  # the boot failed on its own meanwhile
                    return
            if sb.expiry_task is not None and sb.expiry_task is not current:
                sb.expiry_task.cancel()
            await self.teardown(sb)
            sb.state = "stopped"
            await sandbox_store.update(self.store, sb.id, state="stopped", stopped_at=now_iso(), stop_reason=reason)
            self._finish(sb)

    def _finish(self, sb: SandboxRuntime) -> None:
        sb.ended.set()
        self.events.status(sb, state="destroyed")
        self.events.close(sb.id)
        self.live.remove(sb.id)
        sb.secrets = {}
        sb.model_keys = {}
        sb.provided_secrets = {}

    async def teardown(self, sb: SandboxRuntime) -> None:
        if sb.disk_watch is not None:
            sb.disk_watch.cancel()
        job = sb.workspace_job
        if job is not None and not job.done():
            await asyncio.wait([job], timeout=120)  # mkfs/mount still running: let it finish, then undo it
        host = self.host(sb)
        for ext in self.extensions:
            try:
                await ext.on_destroy(host, sb)
            except Exception:
                log.exception("boot extension teardown failed for %s", sb.id)
        if os.geteuid() != 0 and sb.agent is not None:
            # Files the agent created as root cannot be removed by a non-root daemon otherwise.
            try:
                await self.driver.exec(sb.agent.id, ["sh", "-c", "chmod -R a+rwX /workspace /agent 2>/dev/null"], watchdog_s=30)
            except Exception:
                pass
        try:
            containers, volumes = await self.driver.sandbox_remains(sb.id, self.daemon_id)
        except Exception as exc:
            log.warning("cannot list the containers of %s: %s", sb.id, exc)
            containers, volumes = [], []
        ids = set(containers) | {c.id for c in [sb.agent, *sb.services.values(), *sb.aux] if c is not None}
        results = await asyncio.gather(*(self.driver.remove_container(i) for i in ids), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.warning("removing a container of %s failed: %s", sb.id, result)
        if sb.network is not None and sb.network_pooled and self.networks is not None:
            await self.networks.give_back(sb.network)  # every container of the sandbox is removed by now
        elif sb.network is not None:
            try:
                await self.driver.remove_network(sb.network)
            except Exception as exc:
                log.warning("removing network of %s failed: %s", sb.id, exc)
        try:  # the named volumes of its images' VOLUME lines (engine/docker.py)
            await asyncio.gather(*(self.driver.remove_volume(name) for name in volumes))
        except Exception as exc:
            log.warning("removing the volumes of %s failed: %s", sb.id, exc)
        if sb.firewalled:
            try:
                await self.firewall.release(sb.id)
            except FirewallError as exc:
                log.warning("removing the host firewall rules of %s failed: %s", sb.id, exc)
        try:
            await sandbox_store.delete_tokens(self.store, sb.id)
        except Exception:
            log.exception("deleting the token of %s failed", sb.id)
        await asyncio.to_thread(self._remove_dirs, [sb.id])

    async def expire(self, sb: SandboxRuntime) -> None:
        """Destroys the sandbox once its time is up (`sb.expires`)."""
        while True:
            delay = sb.expires - time.time()
            if delay <= 0:
                break
            await asyncio.sleep(min(delay, 3600))
        log.info("sandbox %s reached its timeout", sb.id)
        await self.destroy(sb.id, reason="timeout")

    async def set_timeout(self, sandbox_id: str, seconds: float) -> None:
        """Set the remaining life to `seconds` from now; Conflict when the sandbox is stopped."""
        sb = await self.live.require_live(sandbox_id)
        sb.expires = time.time() + seconds
        await sandbox_store.update(self.store, sb.id, expires_at=iso(sb.expires))
        if sb.expiry_task is not None:
            sb.expiry_task.cancel()
        sb.expiry_task = self.tasks.spawn(self.expire(sb))


def created_at(obj: dict[str, Any]) -> float | None:
    """When the engine created a container (`Created`: epoch seconds), network (`Created`: RFC 3339
    with nanoseconds) or volume (`CreatedAt`: RFC 3339), as epoch seconds; None when unreadable."""
    value = obj.get("Created", obj.get("CreatedAt"))
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?$", value.strip())
    if match is None:
        return None
    zone = match.group(2) or "Z"
    try:
        stamp = datetime.fromisoformat(match.group(1) + ("+00:00" if zone == "Z" else zone))
    except ValueError:
        return None
    return stamp.timestamp()


def unowned(obj: dict[str, Any], owned: set[str], now: float, grace_s: float) -> bool:
    """Whether a sweep removes the engine object: its sandbox is not owned and (with a grace) it is
    older than `grace_s` (one whose age is unreadable is left to the start and stop reaping)."""
    labels = obj.get("Labels") or {}
    if labels.get("svc.sandbox", "") in owned:
        return False
    if grace_s <= 0:
        return True
    created = created_at(obj)
    return created is not None and now - created > grace_s
