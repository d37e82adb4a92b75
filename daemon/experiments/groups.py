"""What the experiment and suite kinds share: a group's loaded context, its failure, the
per-replica stream event, the hooks a kind implements (:class:`GroupKindHooks`) and what a kind may
use of the service that runs it (:class:`GroupHost`). No import of the service or of a kind: both
import this."""
from __future__ import annotations

from abc import ABC, abstractmethod

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from aiohttp import web

from daemon.events import EventBus
from daemon.runner.engine import GroupKind, Job
from daemon.spec import SpecDocument
from daemon.store.db import Store, loads

# Called once an experiment is over, with its final status (completed, failed, cancelled).
CompletedHook = Callable[[web.Application, str, str], Awaitable[None]]  # (app, experiment_id, status)
COMPLETED_HOOKS_KEY = web.AppKey("experiments.completed_hooks", list[CompletedHook])


class GroupFailed(Exception):
    """The experiment or suite itself cannot proceed (for example its spec version is gone)."""


@dataclass
class GroupContext:
    kind: str  # experiment | suite (the engine kind's name)
    id: str
    tenant_id: str
    spec_record: dict[str, Any]
    spec: SpecDocument
    inputs: dict[str, Any] | None
    cap: int | None
    secret_names: list[str] = field(default_factory=list)

    @property
    def limit_key(self) -> str:
        return f"{self.tenant_id}:{self.spec_record['id']}"

    @property
    def key_limit(self) -> int | None:
        return self.spec.resources.fixed_concurrency


@dataclass(frozen=True)
class GroupDone:
    """A finished group: its owner and the `done` event its stream ends with."""

    tenant_id: str
    event: dict[str, Any]


class GroupHost(Protocol):
    """What a kind may use of the service that runs its groups (daemon.experiments.service)."""

    @property
    def app(self) -> web.Application: ...

    @property
    def store(self) -> Store: ...

    @property
    def events(self) -> EventBus: ...

    async def context(self, group_id: str) -> GroupContext: ...

    async def run_job(self, job: Job, cancel: asyncio.Event) -> Any: ...

    async def emit_webhook(self, tenant_id: str, event: str, body: dict[str, Any]) -> None: ...


class GroupKindHooks(GroupKind, ABC):
    """A kind of group run by the experiment service: the engine's hooks plus the service's. The
    service calls them and does the rest itself (job states, the scheduler, closing the stream,
    forgetting the group's context and secrets); a kind never reaches into the service."""

    def __init__(self, service: GroupHost):
        self.service = service

    @abstractmethod
    def topic(self, group_id: str) -> str:
        """The stream topic of one group."""

    async def run_job(self, job: Job, cancel: asyncio.Event) -> Any:
        return await self.service.run_job(job, cancel)

    @abstractmethod
    async def group_row(self, group_id: str) -> tuple[Any, int | None]:
        """The group's stored row (None when it is gone) and its concurrency cap."""

    async def group_queued(self, group_id: str) -> None:
        """The group's pending jobs were queued."""

    async def scenario_kwargs(self, ctx: GroupContext, matrix_entry: dict[str, Any] | None) -> dict[str, Any]:
        """ScenarioRequest fields this kind sets for one job (LookupError when the job cannot run)."""
        return {}

    async def job_started(self, ctx: GroupContext, row: Any) -> None:
        """One job was marked running."""

    async def matrix_entry(self, row: Any) -> dict[str, Any] | None:
        """The matrix entry one job runs (None: the spec as it is)."""
        return None

    async def jobs_changed(self, group_id: str) -> None:
        """Queued jobs were dropped or cancelled."""

    async def group_failed(self, group_id: str, message: str, now: str) -> None:
        """The group cannot proceed: store why."""

    async def replay(self, ctx: GroupContext) -> None:
        """After a restart, before the group's queued jobs are submitted again."""

    async def finish(self, group_id: str) -> GroupDone | None:
        """No job of the group is queued or running: store the group as finished and answer its
        `done` event, or None when it is not over (or was already finished). The service then
        publishes the event, closes the stream and forgets the group, and calls `closed`."""
        return None

    async def closed(self, group_id: str, done: GroupDone) -> None:
        """After the group's stream was closed: what follows its end (hooks, webhooks)."""


def replica_event(job: Any) -> dict[str, Any]:
    """The replica stream's per-completion event (DECISIONS: {type, index, seed, run_id, status,
    score, duration_ms})."""
    run = loads(job["result"], None) or {}
    duration = run.get("duration_ms")
    return {
        "type": "replica",
        "index": job["replica_index"],
        "seed": job["seed"],
        "run_id": job["run_id"],
        "status": job["status"],
        "score": job["score"],
        "duration_ms": duration if isinstance(duration, int) else job["wall_ms"],
    }
