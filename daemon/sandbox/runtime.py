"""The in-memory record of a live sandbox (`SandboxRuntime`), what the manager's parts share (the
registry of live sandboxes `LiveSandboxes`, the lifecycle stream `SandboxEvents`, the background
tasks `BackgroundTasks`) and the small helpers every module of the sandbox package uses: the
lifecycle stream's topic, timestamps, message tails, sizes."""
from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Coroutine, Iterator

from daemon.errors import Conflict, NotFound
from daemon.sandbox.audit import AuditLog
from daemon.sandbox.db_audit import DbAuditReader
from daemon.sandbox.engine import ContainerInfo, ContainerSpec
from daemon.sandbox.models import BootFailure, Limits
from daemon.sandbox.services import ServicePlan
from daemon.store import sandboxes as sandbox_store

if TYPE_CHECKING:
    from daemon.config import Settings
    from daemon.events import EventBus
    from daemon.store.db import Store

TOPIC_RETENTION_S = 600.0


def topic(sandbox_id: str) -> str:
    """The EventBus topic of a sandbox's lifecycle stream."""
    return f"sandbox:{sandbox_id}"


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class SandboxRuntime:
    """The in-memory side of a live sandbox (the row in SQLite is the durable side)."""

    id: str
    tenant_id: str
    shape: str
    seed: str
    image: str
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
    node: str | None = None  # the node its agent container runs on (engine `node_of`)
    agent_spec: ContainerSpec | None = None  # what the agent container was made from (a clean verifier copies it)
    agent_env: dict[str, str] = field(default_factory=dict)
    services: dict[str, ContainerInfo] = field(default_factory=dict)
    aux: list[ContainerInfo] = field(default_factory=list)
    manifest: list[dict[str, Any]] | None = None
    manifest_taken_at: str | None = None
    boot_task: asyncio.Task[None] | None = None
    expiry_task: asyncio.Task[None] | None = None
    destroy_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ended: asyncio.Event = field(default_factory=asyncio.Event)  # set once stopped or failed and torn down
    audit: AuditLog | None = None
    ready_audit_mark: int = 0  # the audit's sequence number when the sandbox became ready (after setup)
    oom_kills: int = 0
    size_checked: float = 0.0
    size_check_cost: float = 0.0
    size_check_pending: asyncio.Task[None] | None = None
    limits_exceeded: list[str] = field(default_factory=list)
    model_keys: dict[str, str] = field(default_factory=dict)  # the model gateway's keys: never in the agent's env
    db_readers: list[DbAuditReader] = field(default_factory=list)  # its audited postgres services' (db_audit.py)
    extension_state: dict[str, Any] = field(default_factory=dict)  # per-extension state (BootExtension)
    alongside: list[asyncio.Task[Any]] = field(default_factory=list)  # helpers starting with the containers (boot.py)
    workspace_job: asyncio.Future[float] | None = None  # the thread making the workspace (teardown waits for it)
    firewalled: bool = False  # host firewall rules may exist for this sandbox (teardown releases them)
    network_pooled: bool = False  # `network` is the network pool's (network_pool.py): given back, not removed
    disk_mounted: bool = False  # the workspace is its own size-limited filesystem (diskquota.py)
    disk_watch: asyncio.Task[None] | None = None
    disk_exceeded: dict[str, Any] | None = None  # the `warning` details once the workspace hit its limit
    # Warm pool (pool.py): the shape a pooled sandbox was booted for (None: booted for its run),
    # whether this run got it from the pool, and the per-run agent environment every exec carries
    # (a pooled container was created before its run, so the run's values cannot be in its env).
    pool_key: str | None = None
    pooled: bool = False
    run_env: dict[str, str] = field(default_factory=dict)
    boot_started: float = 0.0  # perf_counter() when the create request came in
    boot_steps_ms: dict[str, int] = field(default_factory=dict)  # each boot step's time (run_setup: the spec's setup)
    boot_failure: BootFailure | None = None  # the step that failed the boot and its (redacted) message

    @property
    def labels(self) -> dict[str, str]:
        return {"svc.sandbox": self.id, "svc.tenant": self.tenant_id}

    def secret_values(self) -> list[str]:
        return list(self.secrets.values()) + list(self.model_keys.values()) + list(self.provided_secrets.values())


async def all_or_nothing(coros: list[Coroutine[Any, Any, Any]]) -> None:
    """Run concurrently; on the first failure cancel the rest and raise that failure (a
    BootFailure when there is one)."""
    if not coros:
        return
    try:
        async with asyncio.TaskGroup() as group:
            for coro in coros:
                group.create_task(coro)
    except BaseExceptionGroup as group_error:
        boot = [e for e in leaves(group_error) if isinstance(e, BootFailure)]
        if boot:
            raise boot[0] from None
        first = next(iter(leaves(group_error)))
        raise first from None


def leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from leaves(exc)
        else:
            yield exc


def tail(text: str, limit: int = 800) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def size_text(num: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if num >= size:
            value = num / size
            return f"{value:g}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{num}B"


def rmtree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)



def sandbox_labels(sb: SandboxRuntime, daemon_id: str, role: str) -> dict[str, str]:
    """The labels of a container or network of `sb` (the engine finds them again by these)."""
    labels = {**sb.labels, "svc.daemon": daemon_id, "svc.role": role}
    if sb.state == "pooled":  # booted ahead of any run: no tenant names it
        labels.pop("svc.tenant", None)
        labels["svc.pool"] = sb.pool_key or ""
    return labels


def runtime_root(settings: Settings) -> Path:
    """Per-sandbox daemon-side files (mock records, the agent bundle, raw captures)."""
    return settings.home / "sandbox-runtime"


def evidence_root(settings: Settings) -> Path:
    """Per-sandbox authoritative audit logs (audit.py). No container mounts anything here."""
    return settings.home / "sandbox-evidence"


class LiveSandboxes:
    """The registry of live sandboxes (booting, ready, running), by id: the one the manager, its
    lifecycle, commands, workspace files and the warm pool share. A sandbox is added when its
    create reserves a capacity slot and removed once its teardown finished."""

    def __init__(self, store: Store):
        self._store = store
        self._by_id: dict[str, SandboxRuntime] = {}

    def get(self, sandbox_id: str) -> SandboxRuntime | None:
        return self._by_id.get(sandbox_id)

    def add(self, sb: SandboxRuntime) -> None:
        self._by_id[sb.id] = sb

    def remove(self, sandbox_id: str) -> None:
        self._by_id.pop(sandbox_id, None)

    def __contains__(self, sandbox_id: object) -> bool:
        return sandbox_id in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[SandboxRuntime]:
        return iter(list(self._by_id.values()))

    def ids(self) -> set[str]:
        return set(self._by_id)

    def count(self, tenant_id: str) -> int:
        return sum(1 for sb in self._by_id.values() if sb.tenant_id == tenant_id)

    async def require_live(self, sandbox_id: str, wait_boot: float | None = None) -> SandboxRuntime:
        """The live sandbox; with `wait_boot`, once a boot in progress ended (at most that long).
        NotFound when there never was such a sandbox, Conflict when it stopped or is still booting."""
        sb = self._by_id.get(sandbox_id)
        if sb is None:
            row = await sandbox_store.get(self._store, sandbox_id)
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
            return await self.require_live(sandbox_id)
        return sb

    async def require_ready(self, sandbox_id: str, wait_boot: float = 120.0) -> SandboxRuntime:
        """As `require_live`, and Conflict unless the sandbox is ready or running."""
        sb = await self.require_live(sandbox_id, wait_boot)
        if sb.state not in ("ready", "running"):
            raise Conflict(f"sandbox '{sandbox_id}' is {sb.state}", sb.state)
        return sb


class SandboxEvents:
    """A sandbox's lifecycle stream (`sandbox:<id>` on the event bus)."""

    def __init__(self, bus: EventBus):
        self.bus = bus

    def publish(self, sandbox_id: str, event_type: str, data: dict[str, Any]) -> None:
        self.bus.publish(topic(sandbox_id), {"event_type": event_type, "data": data})

    def status(self, sb: SandboxRuntime, **data: object) -> None:
        if sb.state == "pooled":
            return  # nobody can follow a sandbox before a run claims it
        self.publish(sb.id, "status", data)

    def close(self, sandbox_id: str) -> None:
        """The stream ends; its history stays readable for TOPIC_RETENTION_S."""
        self.bus.close(topic(sandbox_id))
        try:
            asyncio.get_running_loop().call_later(TOPIC_RETENTION_S, self.bus.forget, topic(sandbox_id))
        except RuntimeError:
            pass


class BackgroundTasks:
    """Tasks the manager's parts start and nobody awaits (boots, expiry timers, pool refills):
    kept referenced until done, cancelled together at shutdown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
