"""The in-memory record of a live sandbox (`SandboxRuntime`) and the small helpers every module of
the sandbox package shares: the lifecycle stream's topic, timestamps, message tails, sizes."""
from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from daemon.sandbox.audit import AuditLog
from daemon.sandbox.db_audit import DbAuditReader
from daemon.sandbox.engine import ContainerInfo
from daemon.sandbox.models import BootFailure, Limits
from daemon.sandbox.services import ServicePlan


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
    model_keys: dict[str, str] = field(default_factory=dict)  # the model gateway's keys: never in the agent's env
    db_readers: list[DbAuditReader] = field(default_factory=list)  # its audited postgres services' (db_audit.py)
    extension_state: dict[str, Any] = field(default_factory=dict)  # per-extension state (BootExtension)
    alongside: list[asyncio.Task] = field(default_factory=list)  # helpers starting with the containers (boot.py)
    workspace_job: asyncio.Future | None = None  # the thread making the workspace (teardown waits for it)
    firewalled: bool = False  # host firewall rules may exist for this sandbox (teardown releases them)
    disk_mounted: bool = False  # the workspace is its own size-limited filesystem (diskquota.py)
    disk_watch: asyncio.Task | None = None
    disk_exceeded: dict[str, Any] | None = None  # the `warning` details once the workspace hit its limit
    # Warm pool (pool.py): the shape a pooled sandbox was booted for (None: booted for its run),
    # whether this run got it from the pool, and the per-run agent environment every exec carries
    # (a pooled container was created before its run, so the run's values cannot be in its env).
    pool_key: str | None = None
    pooled: bool = False
    run_env: dict[str, str] = field(default_factory=dict)
    boot_started: float = 0.0  # perf_counter() when the create request came in

    @property
    def labels(self) -> dict[str, str]:
        return {"svc.sandbox": self.id, "svc.tenant": self.tenant_id}

    def secret_values(self) -> list[str]:
        return list(self.secrets.values()) + list(self.model_keys.values()) + list(self.provided_secrets.values())


async def all_or_nothing(coros: list) -> None:
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


def leaves(group: BaseExceptionGroup):
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

