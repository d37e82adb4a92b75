"""A scenario run's state record: everything one run of :func:`daemon.runner.scenario.run_scenario`
knows, as one dataclass the phase functions (:mod:`daemon.runner.phases`) read and fill in."""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from aiohttp import web

from daemon.errors import AtCapacity
from daemon.runner import records
from daemon.runner.agent import AgentOutcome, ResolvedAgent
from daemon.sandbox.handle import Sandbox
from daemon.sandbox.models import ExecResult
from daemon.scoring.checks.results import InvariantOutcome
from daemon.appkeys import EVENTS, SANDBOXES, SETTINGS, STORE, URL_SIGNING_KEY

if TYPE_CHECKING:
    from daemon.config import Settings
    from daemon.events import EventBus
    from daemon.sandbox.audit import AuditLog
    from daemon.sandbox.manager import SandboxManager
    from daemon.spec.models import SpecDocument
    from daemon.store.db import Store
    from daemon.store.runs import RunRow

TOPIC_RETENTION_S = 600.0
TRACE_POLL_S = 0.5
AUDIT_SETTLE_S = 0.2
DEFAULT_SCENARIO_TIMEOUT_S = 30 * 60.0
CANCEL_KEY = "run_cancels"


def topic(run_id: str) -> str:
    return f"run:{run_id}"


def redactor(secrets: dict[str, str]) -> tuple[Callable[[str], str], Callable[[Any], Any]]:
    from daemon.sandbox.audit import redact, redact_obj

    values = [v for v in secrets.values() if v]
    return (lambda text: redact(text, values)), (lambda obj: redact_obj(obj, values))


class RecordingSandbox(Sandbox):
    """The run's sandbox handle, with every command the runner sends (`exec` with `record`, and
    `service_exec`) appended to `log` for the trajectory, under the run's current `phase`."""

    def __init__(self, sandbox: Sandbox, log: list[dict[str, Any]], phase: str):
        super().__init__(sandbox.runtime, sandbox.parts)
        self.log = log
        self.phase = phase

    async def exec(self, command: str | list[str], *, timeout_s: float | None = None, env: dict[str, str] | None = None,
                   workdir: str = "/workspace", background: bool = False, user: str | None = None,
                   record: bool = True) -> ExecResult:
        result = await super().exec(command, timeout_s=timeout_s, env=env, workdir=workdir, background=background,
                                    user=user, record=record)
        if record:
            self._note(result, None)
        return result

    async def service_exec(self, service: str, command: list[str], timeout_s: float = 30) -> ExecResult:
        result = await super().service_exec(service, command, timeout_s)
        self._note(result, service)
        return result

    def _note(self, result: ExecResult, service: str | None) -> None:
        self.log.append({
            "phase": self.phase, "service": service, "command": result.command, "exit_code": result.exit_code,
            "duration_ms": result.duration_ms, "timed_out": result.timed_out,
        })


@dataclass(eq=False)
class ScenarioState:
    # what the run was asked to do
    app: web.Application
    tenant_id: str
    spec_record: dict[str, Any]
    spec: SpecDocument
    run_id: str
    seed: str
    inputs: dict[str, Any]
    matrix_entry: dict[str, Any]
    request_secrets: dict[str, str]
    given_sandbox: str | None
    experiment_id: str | None
    scenario_id: str | None
    cancel: asyncio.Event
    dataset_record: dict[str, Any] | None = None  # {id, expected} of a dataset scenario's record
    defer_webhook: bool = False  # the caller sends run.completed (ScenarioRequest.defer_webhook)
    pins: dict[str, Any] = field(default_factory=dict)  # what the run resolved and depends on (reproducers pin it)
    row: RunRow | None = None  # the run row as this run last wrote it (`start`, `save`): never read back
    # what it found out, phase by phase
    sandbox_id: str | None = None
    steps: int = 0
    timings: dict[str, int] = field(default_factory=dict)
    commands: list[dict[str, Any]] = field(default_factory=list)
    phase: str = "boot"  # set_phase: the commands' log names it
    sandbox: RecordingSandbox | None = None  # the run's sandbox, once booted (or the given one)
    agent: ResolvedAgent | None = None
    agent_outcome: AgentOutcome | None = None
    error: dict[str, Any] | None = None
    secret_values: dict[str, str] = field(default_factory=dict)
    prompt: str = ""
    task: dict[str, Any] = field(default_factory=dict)
    invariant_results: list[InvariantOutcome] = field(default_factory=list)
    forbidden_results: list[dict[str, Any]] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    audit_events: list[dict[str, Any]] = field(default_factory=list)
    agent_audit: list[dict[str, Any]] = field(default_factory=list)
    audit_mark: int = 0  # the audit stream's sequence number when the agent started
    container_disk: int | None = None  # bytes written outside /workspace, once over resources.disk
    # what the agent did that ended its own run (the agent stopped its container): violations, so the
    # run fails rather than errs
    agent_faults: list[dict[str, Any]] = field(default_factory=list)
    disk_stop: asyncio.Future[int] | None = None  # the reaper started because of container_disk
    audit: AuditLog | None = None  # the sandbox's, once it booted
    trace_events: list[dict[str, Any]] = field(default_factory=list)
    workspace_changes: list[dict[str, Any]] | None = None
    container_changes: list[dict[str, Any]] | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    at_capacity: AtCapacity | None = None
    sandbox_live: bool = False
    started: float = field(default_factory=time.perf_counter)
    trace_watermark: int = 0
    published_spans: set[tuple[str, str]] = field(default_factory=set)
    # derived from the above
    spec_id: str = field(init=False)
    spec_version: int = field(init=False)
    store: Store = field(init=False)
    manager: SandboxManager | None = field(init=False)
    events: EventBus = field(init=False)
    topic: str = field(init=False)

    def __post_init__(self) -> None:
        self.spec_id = self.spec_record["id"]
        self.spec_version = int(self.spec_record.get("version") or 1)
        self.store = self.app[STORE]
        self.manager = self.app.get(SANDBOXES)
        self.events = self.app[EVENTS]
        self.topic = topic(self.run_id)
        self.sandbox_id = self.given_sandbox
        self.secret_values = dict(self.request_secrets)

    @classmethod
    def create(cls, app: web.Application, *, tenant_id: str, spec_record: dict[str, Any], spec: SpecDocument, run_id: str,
               seed: str, inputs: dict[str, Any] | None, matrix_entry: dict[str, Any] | None, secrets: dict[str, str] | None,
               sandbox_id: str | None, experiment_id: str | None, scenario_id: str | None, cancel: asyncio.Event | None,
               dataset_record: dict[str, Any] | None = None) -> ScenarioState:
        return cls(app=app, tenant_id=tenant_id, spec_record=spec_record, spec=spec, run_id=run_id, seed=str(seed),
                   inputs=dict(inputs or {}), matrix_entry=dict(matrix_entry or {}), request_secrets=dict(secrets or {}),
                   given_sandbox=sandbox_id, experiment_id=experiment_id, scenario_id=scenario_id, cancel=cancel or asyncio.Event(),
                   dataset_record=dataset_record)

    async def save(self, **fields: Any) -> None:
        """Columns of the run row that live readers follow before the verdict (its sandbox, agent,
        model recording): written, and kept in `row` as written."""
        await records.update(self.store, self.run_id, **fields)
        if self.row is not None:
            self.row = self.row.with_fields(**fields)

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        if self.sandbox is not None:
            self.sandbox.phase = phase

    def attach(self, sandbox: Sandbox) -> RecordingSandbox:
        """The run's sandbox from now on: its commands are recorded."""
        self.sandbox = RecordingSandbox(sandbox, self.commands, self.phase)
        return self.sandbox

    def publish(self, event: dict[str, Any]) -> None:
        self.events.publish(self.topic, event)

    def step(self, action: str, started: float) -> int:
        self.steps += 1
        latency = int((time.perf_counter() - started) * 1000)
        self.timings[f"{action}_ms"] = self.timings.get(f"{action}_ms", 0) + latency
        self.publish({"type": "step", "step": self.steps, "action": action, "latency_ms": latency})
        return latency

    def clock(self, part: str, started: float) -> None:
        """Time spent in `part` of the run (`timings[<part>_ms]`), without a step event."""
        ms = int((time.perf_counter() - started) * 1000)
        self.timings[f"{part}_ms"] = self.timings.get(f"{part}_ms", 0) + ms

    def fail(self, step: str, message: str, code: str) -> None:
        if self.error is None:
            self.error = {"step": step, "message": message, "code": code}


def artifacts_root(settings: Settings) -> Path:
    raw = os.environ.get("SERVICE_ARTIFACTS_DIR")
    return Path(raw).expanduser() if raw else settings.home / "artifacts"


def base_url(settings: Settings) -> str | None:
    return f"http://127.0.0.1:{settings.port}" if settings.port else None


async def body_of(app: web.Application, row: RunRow) -> dict[str, Any]:
    """The Run body the API answers for `row`, its trajectory URL signed."""
    key = app.get(URL_SIGNING_KEY) or await asyncio.to_thread(records.signing_key, app[SETTINGS].home)
    return records.body(row, key=key, base_url=base_url(app[SETTINGS]))


async def run_body(app: web.Application, run_id: str) -> dict[str, Any] | None:
    """The stored run's body (None when there is no such run): for readers, never the run itself."""
    row = await records.get(app[STORE], run_id)
    return await body_of(app, row) if row is not None else None
