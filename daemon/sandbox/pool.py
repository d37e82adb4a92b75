"""The warm sandbox pool (issue 18): sandboxes booted ahead of their run, per *shape*.

A shape is the sha256 of everything fixed when the containers are created: the image, the spec's
SHAPE_FIELDS (its services and their fixtures, workspace fixtures with the uploaded files' digests,
resources, network/egress policy, audit switches, which determinism switches are on, the model gateway (models:), the agent
block), shape A's service
names, whether an agent bundle is mounted, the agent snapshot's egress entries and the runtime.
Nothing of a run is in it or in a pooled sandbox: a pooled sandbox has no tenant (no `svc.tenant`
label, no row, no token), no secrets, a throwaway seed; `boot.CLAIM_STEPS` bind the run's secrets,
token, seed (services' credentials, determinism), clock, bundle and setup commands at claim time.
Each pooled sandbox serves one run and is destroyed with it (normal teardown).

Filling: a shape is pooled only after it was asked for once (a miss) or prewarmed for the job
engine's queue (`prewarm`). After each claim or miss the shape is refilled in the background up to
`SERVICE_POOL_SIZE` (default 2; 0 turns the pool off), bounded overall by `SERVICE_POOL_MAX_TOTAL`
(default 8) and the sandbox capacity (`SERVICE_MAX_SANDBOXES`), and not at all while the host has
less than `SERVICE_POOL_MIN_FREE_MB` (default 512) MiB available. A shape unused for
`SERVICE_POOL_IDLE_S` (default 300 s) is drained. A cold boot that needs capacity drains a pooled
sandbox first (`make_room`). On a swarm the pooled sandboxes are placed like any other (each on
the node with the most CPU and memory left: engine/swarm/placement.py), so a shape's pool spreads
over the nodes, and a claim binds the run through the same steps (the workspace mirror carries what
they write to the node).

Pooled containers carry `svc.daemon`, `svc.sandbox` and `svc.pool=<shape>`: a restarted daemon
reaps them like any orphan; shutdown drains the pool (`close`), boots in progress included.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import statistics
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Coroutine

import psutil

from daemon.sandbox.models import Limits
from daemon.sandbox.runtime import BackgroundTasks, LiveSandboxes, SandboxRuntime

if TYPE_CHECKING:
    from daemon.config import Settings
    from daemon.spec.models import SpecDocument

log = logging.getLogger("svcd.sandbox.pool")

REFILL_SAMPLES = 256  # refill times kept for the p50
RETRY_FIRST_S = 5.0  # a shape whose pooled boot failed: first pause before pooling it again
RETRY_MAX_S = 300.0
ROOM_RETRY_S = 1.0  # a fill the engine had no room for is tried again after this
# The spec's parts that shape the containers. The rest is the run's (task, setup commands, secret
# names) or the scorer's (invariants, scoring, ...), so specs differing only there share a pool.
SHAPE_FIELDS = {"base", "agent", "services", "fixtures", "network", "audit", "forbidden", "determinism", "resources", "models"}


@dataclass
class Template:
    """What a pooled sandbox of one shape is booted from: nothing of any run."""

    key: str
    shape: str  # "A" (image) | "B" (spec)
    image: str
    spec: Any
    names: list[str] | None  # shape A services
    limits: Limits
    bundle: bool
    snapshot_egress: dict[str, list[Any]] = field(default_factory=dict)
    fixture_files: dict[str, dict[str, Any]] | None = None


def poolable(spec: SpecDocument | None, runtime: str) -> bool:
    """`dns: static` derives the network's subnet from the seed, so it is booted per run (the swarm
    refuses it anyway)."""
    if runtime not in ("docker", "swarm"):
        return False
    determinism = spec.determinism if spec is not None else None
    return determinism is None or determinism.dns != "static"


def shape_key(*, shape: str, image: str, spec: SpecDocument | None, names: list[str] | None, limits: Limits, bundle: bool,
              snapshot_egress: dict[str, list[Any]] | None, fixture_files: dict[str, dict[str, Any]] | None,
              runtime: str) -> str:
    """The shape's content hash. The seed and the clock's instant are the run's, so only whether
    they are set counts; the sandbox's timeout is the run's too."""
    doc = spec.model_dump(mode="json", include=SHAPE_FIELDS) if spec is not None else None
    if doc and doc.get("determinism"):
        det = doc["determinism"]
        det["seed"] = det.get("seed") is not None
        det["clock"] = det.get("clock") is not None
    resources = {k: v for k, v in limits.as_dict().items() if k != "timeout"}
    files = {path: info.get("digest") for path, info in (fixture_files or {}).items()}
    material = {"shape": shape, "image": image, "spec": doc, "names": names or [], "resources": resources,
                "bundle": bundle, "egress": {h: sorted(map(str, p)) for h, p in sorted((snapshot_egress or {}).items())},
                "fixture_files": files, "runtime": runtime}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


class SandboxPool:
    """The pooled sandboxes by shape. `new_runtime` makes the record of a sandbox to pool (no run's
    values), `boot` runs its shape's boot steps (`boot.POOL_STEPS`), `teardown` destroys one; the
    live sandboxes (`live`, the manager's registry) count against the same capacity."""

    def __init__(self, settings: Settings, runtime: str, live: LiveSandboxes, tasks: BackgroundTasks,
                 new_runtime: Callable[[Template], SandboxRuntime],
                 boot: Callable[[SandboxRuntime], Coroutine[Any, Any, None]],
                 teardown: Callable[[SandboxRuntime], Coroutine[Any, Any, None]],
                 room_for: Callable[[int, int], bool] = lambda cpus, memory: True):
        self.settings = settings
        self.room_for = room_for  # the engine has room for one more (a swarm's nodes: engine/swarm/placement.py)
        self.runtime = runtime
        self.live = live
        self.tasks = tasks
        self.new_runtime = new_runtime
        self.boot = boot
        self.teardown = teardown
        self.ready: dict[str, deque[SandboxRuntime]] = {}
        self.filling: dict[str, int] = {}
        self.templates: dict[str, Template] = {}
        self.last_used: dict[str, float] = {}
        self.hits = 0
        self.misses = 0
        self.refills = 0
        self.refill_failures = 0
        # a shape whose pooled boot failed is not tried again before this (doubling per failure in a row):
        # a broken fixture would otherwise add a failing background boot to every miss
        self.retry_after: dict[str, float] = {}
        self.failures_in_a_row: dict[str, int] = {}
        self.refill_ms: deque[float] = deque(maxlen=REFILL_SAMPLES)
        self._closing = False
        self._idle_task: asyncio.Task[None] | None = None
        self._boots: set[asyncio.Task[None]] = set()
        self._teardowns: set[asyncio.Task[None]] = set()
        self.booting: set[str] = set()  # ids of the pooled sandboxes booting now (the sweep spares them)
        self._waiting_for_room: set[str] = set()  # shapes whose fill waits for the engine's room (`_fill_later`)

    @property
    def size(self) -> int:
        return max(0, int(self.settings.pool_size))

    @property
    def enabled(self) -> bool:
        return self.size > 0 and self.runtime in ("docker", "swarm")

    def bound(self) -> int:
        return max(0, min(int(self.settings.pool_max_total), int(self.settings.max_sandboxes)))

    def total(self) -> int:
        return sum(len(q) for q in self.ready.values()) + sum(self.filling.values())

    # --- claim and refill ----------------------------------------------------------------------

    def take(self, template: Template) -> "SandboxRuntime | None":
        """A pooled sandbox of the template's shape (a hit), or None (a miss); either way the
        shape is refilled in the background."""
        key = template.key
        self.templates[key] = template
        self.last_used[key] = time.monotonic()
        queue = self.ready.get(key)
        sb = queue.popleft() if queue else None
        if sb is None:
            self.misses += 1
        else:
            self.hits += 1
        self._start_idle_watch()
        self.fill(key)
        return sb

    def owned(self) -> set[str]:
        """The ids of the pooled sandboxes: ready, booting, or being torn down after a failed boot."""
        return {sb.id for queue in self.ready.values() for sb in queue} | self.booting

    def prewarm(self, template: Template) -> None:
        """Fill the shape ahead of a queued job that will ask for it."""
        if not self.enabled or self._closing:
            return
        self.templates[template.key] = template
        self.last_used[template.key] = time.monotonic()
        self._start_idle_watch()
        self.fill(template.key)

    def fill(self, key: str) -> None:
        template = self.templates.get(key)
        if template is None or self._closing or not self.enabled:
            return
        if time.monotonic() < self.retry_after.get(key, 0.0):
            return
        while (len(self.ready.get(key, ())) + self.filling.get(key, 0) < self.size
               and self.total() + len(self.live) < self.settings.max_sandboxes
               and self.total() < self.bound() and self.memory_ok()):
            if not self.room_for_one_more(template):
                self._fill_later(key)  # the runs' sandboxes hold the room now: ask again soon
                return
            self.filling[key] = self.filling.get(key, 0) + 1
            task = self.tasks.spawn(self._boot_one(template))
            self._boots.add(task)
            task.add_done_callback(self._boots.discard)

    def _fill_later(self, key: str) -> None:
        if key in self._waiting_for_room:
            return
        self._waiting_for_room.add(key)

        async def later() -> None:
            try:
                await asyncio.sleep(ROOM_RETRY_S)
            finally:
                self._waiting_for_room.discard(key)
            self.fill(key)

        self.tasks.spawn(later())

    def room_for_one_more(self, template: Template) -> bool:
        """The engine has room for every pooled sandbox booting now and one more of this shape
        (counted as if all were this shape's, on one node: the cautious side)."""
        booting = sum(self.filling.values()) + 1
        return self.room_for(int(template.limits.cpus * 1e9) * booting, template.limits.memory * booting)

    def memory_ok(self) -> bool:
        available: int = psutil.virtual_memory().available
        return available >= int(self.settings.pool_min_free_mb) * 1024 * 1024

    async def _boot_one(self, template: Template) -> None:
        key = template.key
        started = time.perf_counter()
        sb = None
        ok = False
        try:
            sb = self.new_runtime(template)
            self.booting.add(sb.id)
            await self.boot(sb)
            ok = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.refill_failures += 1
            streak = self.failures_in_a_row[key] = self.failures_in_a_row.get(key, 0) + 1
            self.retry_after[key] = time.monotonic() + min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (streak - 1))
            log.warning("pooling a sandbox of shape %s failed: %s", key[:12], str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
        finally:
            self.filling[key] = max(0, self.filling.get(key, 0) - 1)
            if sb is not None and (not ok or self._closing or key not in self.templates):
                await self._discard(sb)
            if sb is not None:
                self.booting.discard(sb.id)
        if sb is None or not ok or self._closing or key not in self.templates:
            return
        self.refills += 1
        self.failures_in_a_row.pop(key, None)
        self.retry_after.pop(key, None)
        self.refill_ms.append((time.perf_counter() - started) * 1000)
        self.ready.setdefault(key, deque()).append(sb)

    async def _discard(self, sb: SandboxRuntime) -> None:
        # its own task: a cancelled caller (the idle watch at shutdown) does not stop it, and
        # close() waits for every one before the driver goes away
        task = asyncio.ensure_future(self.teardown(sb))
        self._teardowns.add(task)
        task.add_done_callback(self._teardowns.discard)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("tearing down pooled sandbox %s failed", sb.id)

    # --- draining ------------------------------------------------------------------------------

    async def drain(self, key: str) -> int:
        """Forget the shape and destroy its pooled sandboxes."""
        self.templates.pop(key, None)
        self.last_used.pop(key, None)
        self.retry_after.pop(key, None)
        self.failures_in_a_row.pop(key, None)
        queue = self.ready.pop(key, deque())
        await asyncio.gather(*(self._discard(sb) for sb in queue))
        return len(queue)

    async def make_room(self) -> None:
        """A cold boot needs capacity: destroy pooled sandboxes (least recently used shape first)
        while live and pooled ones together fill the capacity."""
        while self.total() and len(self.live) + self.total() > self.settings.max_sandboxes:
            keys = sorted((k for k, q in self.ready.items() if q), key=lambda k: self.last_used.get(k, 0.0))
            if not keys:
                return
            await self._discard(self.ready[keys[0]].popleft())

    def _start_idle_watch(self) -> None:
        if self._idle_task is None and not self._closing:
            self._idle_task = self.tasks.spawn(self._drain_idle())

    async def _drain_idle(self) -> None:
        idle_s = max(1.0, float(self.settings.pool_idle_s))
        while not self._closing:
            await asyncio.sleep(min(30.0, idle_s / 4))
            now = time.monotonic()
            # a shape still filling is left for the next look (its boots end in the pool, then go)
            for key in [k for k, used in self.last_used.items() if now - used >= idle_s and not self.filling.get(k)]:
                drained = await self.drain(key)
                log.info("drained the pool of idle shape %s (%d sandboxes)", key[:12], drained)

    async def close(self) -> None:
        """Shutdown: no more refills; every pooled sandbox destroyed (boots in flight discard
        theirs when they end: the manager waits for them)."""
        self._closing = True
        if self._idle_task is not None:
            self._idle_task.cancel()
        boots = list(self._boots)
        for task in boots:
            task.cancel()
        await asyncio.gather(*boots, return_exceptions=True)
        for key in list(self.ready):
            await self.drain(key)
        await asyncio.gather(*list(self._teardowns), return_exceptions=True)

    # --- numbers -------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        samples = list(self.refill_ms)
        now = time.monotonic()
        return {
            "enabled": self.enabled, "size": self.size, "max_total": self.bound(),
            "hits": self.hits, "misses": self.misses, "refills": self.refills, "refill_failures": self.refill_failures,
            "refill_ms_p50": round(statistics.median(samples), 1) if samples else None,
            "pooled": {key[:16]: len(q) for key, q in self.ready.items() if q},
            "booting": {key[:16]: n for key, n in self.filling.items() if n},
            "retry_in_s": {key[:16]: round(until - now, 1) for key, until in self.retry_after.items() if until > now},
        }
