"""The scenario runner: one agent run in one sandbox, scored against one spec.

``await run_scenario(app, tenant_id=..., spec_record=..., spec=..., run_id=..., seed=...)``

1. resolves the agent (snapshot by name -> latest, ``snapshot_id``, ``entrypoint`` override; ``cli``;
   ``image``);
2. boots a sandbox from the spec (or uses ``sandbox_id``, which it then leaves running);
3. substitutes ``{{ name }}`` in the task prompt from the spec's ``task.inputs``, then ``inputs``,
   then the matrix entry, writes ``/workspace/.svc/task.json`` and puts the prompt in
   ``SERVICE_TASK_PROMPT`` (with ``SERVICE_SEED``, ``SERVICE_RUN_ID``, ``SERVICE_TASK_FILE``);
4. runs the agent under ``agent.timeout`` (killed past it: verdict ``error``);
5. runs every invariant check in the workspace, then every forbidden rule over the agent's slice of
   the audit log, its trace events, its captured output and what it changed;
6. composes the score and verdict (SPEC scoring rules 1-5, 7), runs the teardown exports, destroys
   its sandbox, stores the trajectory as a blob and the outcome in the run row, publishes the run
   stream (``run:<id>``) and the ``run.completed`` webhook, and returns the Run body.

``cancel`` (an ``asyncio.Event``) stops the run at once: it ends ``errored`` with reason
``cancelled``. ``resources.timeout`` (covering boot, agent and scoring) ends it ``errored`` with
reason ``scenario_timeout``. When the sandbox pool is full, ``AtCapacity`` propagates and the run
row is back to ``queued``: the caller retries later. Every other failure becomes a verdict.

A run is a state record, :class:`~daemon.runner.state.ScenarioState`, and the phase functions of
:mod:`daemon.runner.phases` (boot, agent, audit, traces, scoring, record) that fill it in; this
module holds the order they run in, the cancel/timeout envelope and the run row's start.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from typing import Any

from aiohttp import web

from daemon.runner import records
from daemon.runner.engine import ENGINE_KEY
from daemon.sandbox.engine import engine_failure
from daemon.runner.agent import AgentResolveError, resolve, write_config_files
from daemon.runner.request import RunOutcome, ScenarioRequest
from daemon.runner.phases import audit_leftovers, boot, finish, run_agent, run_checks, run_forbidden, write_task_file
from daemon.runner.state import (  # the names callers import from here (__all__)
    CANCEL_KEY,
    DEFAULT_SCENARIO_TIMEOUT_S,
    ScenarioState,
    artifacts_root,
    base_url,
    redactor,
    run_body,
    topic,
)
from daemon.store import runs as run_store
from daemon.util import now_iso

__all__ = [
    "CANCEL_KEY", "DEFAULT_SCENARIO_TIMEOUT_S", "ScenarioState", "artifacts_root", "base_url", "execute", "redactor",
    "render_prompt", "run_body", "run_scenario", "topic",
]

log = logging.getLogger("svcd.runner")

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def render_prompt(prompt: str, values: dict[str, Any]) -> tuple[str, list[str]]:
    """``{{ name }}`` placeholders replaced from ``values``; unknown ones are left as written."""
    unresolved: list[str] = []

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            unresolved.append(name)
            return match.group(0)
        value = values[name]
        return value if isinstance(value, str) else json.dumps(value)

    return PLACEHOLDER.sub(sub, prompt), unresolved


async def execute(s: ScenarioState) -> RunOutcome:
    """The run, its cancel event the caller's (who registers it under the run id at CANCEL_KEY, so
    `POST /v1/runs/{id}/cancel` reaches it from before the run starts until it ends)."""
    await ensure_row(s)
    try:
        await drive(s)
    except asyncio.CancelledError:
        s.fail("run", "the run was interrupted (daemon shutting down or its caller gave up)", "cancelled")
        await asyncio.shield(finish(s))
        raise
    if s.at_capacity is not None:
        await records.update(s.store, s.run_id, status="queued", started_at=None)
        raise s.at_capacity
    return await finish(s)


async def drive(s: ScenarioState) -> None:
    body = asyncio.create_task(run_phases(s))
    waiter = asyncio.create_task(s.cancel.wait())
    timeout = s.spec.resources.timeout or DEFAULT_SCENARIO_TIMEOUT_S
    try:
        done, _ = await asyncio.wait({body, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if body not in done:
            if s.cancel.is_set():
                s.fail("run", "the run was cancelled", "cancelled")
            else:
                s.fail("run", f"the scenario exceeded resources.timeout ({timeout:g}s), which covers boot, agent and scoring",
                       "scenario_timeout")
            body.cancel()
        await asyncio.gather(body, return_exceptions=True)
        if not body.cancelled() and body.exception() is not None:
            exc = body.exception()
            log.error("run %s failed unexpectedly", s.run_id, exc_info=exc)
            if exc is not None and engine_failure(exc):  # the daemon's own call to the engine failed: retried in experiments
                s.fail("internal", f"the container engine failed: {type(exc).__name__}: {exc}", "engine_error")
            else:
                s.fail("internal", f"unexpected error: {type(exc).__name__}: {exc}", "internal_error")
    finally:
        waiter.cancel()
        if not body.done():
            body.cancel()
            await asyncio.gather(body, return_exceptions=True)


async def ensure_row(s: ScenarioState) -> None:
    """The run row `running` (created for an experiment's replica): `s.row`, as written."""
    s.row = await run_store.start(
        s.store, run_id=s.run_id, tenant_id=s.tenant_id, spec_id=s.spec_id, spec_version=s.spec_version,
        seed=s.seed, started_at=now_iso(), sandbox_id=s.given_sandbox, inputs=s.inputs or None,
        matrix_entry=s.matrix_entry or None, secret_names=list(s.request_secrets),
        experiment_id=s.experiment_id, scenario_id=s.scenario_id,
    )


async def run_phases(s: ScenarioState) -> None:
    if s.manager is None:
        s.fail("boot", "sandboxes are not available in this daemon", "boot_failed")
        return
    # 1. the agent
    assert s.row is not None
    s.pins = {**s.pins, **(s.row.pins or {})}
    if s.pins.get("model_recording") and s.row.model_recording != s.pins["model_recording"]:
        # what the model gateway reads to replay (an experiment replica's pins arrive with the request)
        await s.save(models="replayed", model_recording=s.pins["model_recording"])
    try:
        s.agent = await resolve(s.app, s.tenant_id, s.spec, s.pins.get("agent_snapshot_id"))
    except AgentResolveError as exc:
        s.fail("agent", str(exc), "agent_unavailable")
        return
    if s.agent.snapshot:
        s.pins["agent_snapshot_id"] = s.agent.snapshot["id"]
    await s.save(agent=s.agent.name)
    spec = s.spec

    # 2. the task (the prompt is known before boot so the agent container carries it)
    values = {**s.spec.task.inputs, **s.inputs, **s.matrix_entry}
    s.prompt, unresolved = render_prompt(s.spec.task.prompt, values)
    s.task = {
        "run_id": s.run_id, "spec_id": s.spec_id, "spec_version": s.spec_version, "seed": s.seed,
        "prompt": s.prompt, "inputs": values, "matrix_entry": s.matrix_entry or None,
        "experiment_id": s.experiment_id, "scenario_id": s.scenario_id,
    }
    if unresolved:
        s.task["unresolved"] = unresolved
    task_env = {
        "SERVICE_TASK_PROMPT": s.prompt, "SERVICE_SEED": s.seed, "SERVICE_RUN_ID": s.run_id,
        "SERVICE_TASK_FILE": "/workspace/.svc/task.json", "SERVICE_SPEC_ID": s.spec_id,
    }
    if s.experiment_id:
        task_env["SERVICE_EXPERIMENT_ID"] = s.experiment_id
    if s.scenario_id:
        task_env["SERVICE_SCENARIO_ID"] = s.scenario_id

    # 3. the sandbox
    started = time.perf_counter()
    if not await boot(s, spec, task_env):
        if s.at_capacity is None:  # at capacity, the run did not really start: no step
            s.step("boot", started)
        return
    s.step("boot", started)
    assert s.sandbox is not None
    booted = s.sandbox.runtime
    if booted.pooled and not s.given_sandbox:  # claimed from the warm pool: its boot ran before the run
        s.timings["claim_ms"] = s.timings.pop("boot_ms", 0)
    if "run_setup" in booted.boot_steps_ms and not s.given_sandbox:
        s.timings["setup_ms"] = booted.boot_steps_ms["run_setup"]
    engine = s.app.get(ENGINE_KEY)
    if engine is not None and engine.concurrency is not None and "boot_ms" in s.timings and not s.given_sandbox:
        # a cold boot's time tells the adaptive limit whether more runs at once still pay
        engine.concurrency.observe_boot(s.timings["boot_ms"], engine.scheduler.queued_count())
    started = time.perf_counter()
    s.secret_values = {**s.sandbox.secret_values(), **s.request_secrets}
    await write_task_file(s)
    if s.agent.config_files:
        try:
            env_values = {**(s.sandbox.runtime.agent_env or {}), **s.secret_values}
            await write_config_files(s.sandbox, s.agent, env_values)
        except AgentResolveError as exc:
            s.fail("agent", str(exc), "agent_unavailable")
            return
    s.step("task", started)

    # 4. the agent
    s.set_phase("agent")
    await run_agent(s, task_env)

    # 5. checks, then forbidden rules
    s.set_phase("checks")
    started = time.perf_counter()
    await run_checks(s)
    await audit_leftovers(s)
    s.step("checks", started)
    started = time.perf_counter()
    run_forbidden(s)
    s.step("forbidden", started)


def queue_ms(queued_at: str | None) -> int | None:
    """Milliseconds from `queued_at` (ISO) until now; None when unknown."""
    if not queued_at:
        return None
    from datetime import datetime, timezone

    try:
        queued = datetime.fromisoformat(queued_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0, int((datetime.now(timezone.utc) - queued).total_seconds() * 1000))


async def run_scenario(app: web.Application, request: ScenarioRequest) -> RunOutcome:
    """Run one scenario end to end and return its outcome, the stored Run inside (see the module
    docstring): the `ScenarioRunner` at `app[RUN_SCENARIO]` unless a test sets its own."""
    r = request
    state = ScenarioState.create(
        app, tenant_id=r.tenant_id, spec_record=r.spec_record, spec=r.spec, run_id=r.run_id, seed=r.seed, inputs=r.inputs,
        matrix_entry=r.matrix_entry, secrets=r.secrets, sandbox_id=r.sandbox_id, experiment_id=r.experiment_id,
        scenario_id=r.scenario_id, cancel=r.cancel, dataset_record=r.dataset_record,
    )
    state.pins = dict(r.pins or {})
    state.defer_webhook = r.defer_webhook
    waited = queue_ms(r.queued_at)
    if waited is not None:
        state.timings["queue_ms"] = waited
    return await execute(state)

