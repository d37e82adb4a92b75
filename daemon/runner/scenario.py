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
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any

from daemon.errors import AtCapacity
from daemon.runner import records
from daemon.runner.agent import (
    AgentOutcome,
    AgentResolveError,
    ResolvedAgent,
    resolve,
    run_image,
    run_in_sandbox,
    write_config_files,
)
from daemon.scoring.checks import CheckContext, JudgeConfig, run_invariant
from daemon.scoring.composite import compose
from daemon.scoring.forbidden import TrajectoryView
from daemon.scoring.forbidden import evaluate as evaluate_forbidden
from daemon.util import now_iso

log = logging.getLogger("svcd.runner")

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
TOPIC_RETENTION_S = 600.0
TRACE_POLL_S = 0.5
AUDIT_SETTLE_S = 0.2
DEFAULT_SCENARIO_TIMEOUT_S = 30 * 60.0
CANCEL_KEY = "run_cancels"


def topic(run_id: str) -> str:
    return f"run:{run_id}"


def render_prompt(prompt: str, values: dict[str, Any]) -> tuple[str, list[str]]:
    """``{{ name }}`` placeholders replaced from ``values``; unknown ones are left as written."""
    unresolved: list[str] = []

    def sub(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            unresolved.append(name)
            return match.group(0)
        value = values[name]
        return value if isinstance(value, str) else json.dumps(value)

    return PLACEHOLDER.sub(sub, prompt), unresolved


def redactor(secrets: dict[str, str]):
    from daemon.sandbox.audit import redact, redact_obj

    values = [v for v in secrets.values() if v]
    return (lambda text: redact(text, values)), (lambda obj: redact_obj(obj, values))


class RecordingSandboxes:
    """The sandbox manager, with every command the runner sends recorded for the trajectory."""

    def __init__(self, manager: Any, log: list[dict[str, Any]], phase: list[str]):
        self._manager = manager
        self._log = log
        self._phase = phase

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)

    async def exec(self, sandbox_id: str, command: Any, **kw: Any) -> Any:
        result = await self._manager.exec(sandbox_id, command, **kw)
        if kw.get("record", True):
            self._note(result, None)
        return result

    async def service_exec(self, sandbox_id: str, service: str, command: list[str], **kw: Any) -> Any:
        result = await self._manager.service_exec(sandbox_id, service, command, **kw)
        self._note(result, service)
        return result

    def _note(self, result: Any, service: str | None) -> None:
        self._log.append({
            "phase": self._phase[0], "service": service, "command": result.command, "exit_code": result.exit_code,
            "duration_ms": result.duration_ms, "timed_out": result.timed_out,
        })


class Scenario:
    def __init__(self, app: Any, *, tenant_id: str, spec_record: dict, spec: Any, run_id: str, seed: str,
                 inputs: dict | None, matrix_entry: dict | None, secrets: dict[str, str] | None, sandbox_id: str | None,
                 experiment_id: str | None, scenario_id: str | None, cancel: asyncio.Event | None):
        self.app = app
        self.tenant_id = tenant_id
        self.spec_record = spec_record
        self.spec = spec
        self.spec_id = spec_record["id"]
        self.spec_version = int(spec_record.get("version") or 1)
        self.run_id = run_id
        self.seed = str(seed)
        self.inputs = dict(inputs or {})
        self.matrix_entry = dict(matrix_entry or {})
        self.request_secrets = dict(secrets or {})
        self.given_sandbox = sandbox_id
        self.sandbox_id = sandbox_id
        self.experiment_id = experiment_id
        self.scenario_id = scenario_id
        self.cancel = cancel or asyncio.Event()
        self.store = app["store"]
        self.manager = app.get("sandboxes")
        self.events = app["events"]
        self.topic = topic(run_id)
        self.steps = 0
        self.timings: dict[str, int] = {}
        self.commands: list[dict[str, Any]] = []
        self.phase = ["boot"]
        self.sandboxes = RecordingSandboxes(self.manager, self.commands, self.phase) if self.manager else None
        self.agent: ResolvedAgent | None = None
        self.agent_outcome: AgentOutcome | None = None
        self.error: dict[str, Any] | None = None
        self.secret_values: dict[str, str] = dict(self.request_secrets)
        self.prompt = ""
        self.task: dict[str, Any] = {}
        self.invariant_results: list[dict[str, Any]] = []
        self.forbidden_results: list[dict[str, Any]] = []
        self.violations: list[dict[str, Any]] = []
        self.audit_events: list[dict[str, Any]] = []
        self.agent_audit: list[dict[str, Any]] = []
        self.audit: Any = None  # the sandbox's AuditLog, once it booted
        self.trace_events: list[dict[str, Any]] = []
        self.workspace_changes: list[dict[str, Any]] | None = None
        self.container_changes: list[dict[str, Any]] | None = None
        self.artifacts: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.at_capacity: AtCapacity | None = None
        self.sandbox_live = False
        self.started = time.perf_counter()
        self.trace_watermark = 0
        self.published_spans: set[tuple[str, str]] = set()

    # --- helpers ---------------------------------------------------------------------------------

    def publish(self, event: dict[str, Any]) -> None:
        self.events.publish(self.topic, event)

    def step(self, action: str, started: float) -> int:
        self.steps += 1
        latency = int((time.perf_counter() - started) * 1000)
        self.timings[f"{action}_ms"] = self.timings.get(f"{action}_ms", 0) + latency
        self.publish({"type": "step", "step": self.steps, "action": action, "latency_ms": latency})
        return latency

    def fail(self, step: str, message: str, code: str) -> None:
        if self.error is None:
            self.error = {"step": step, "message": message, "code": code}

    @property
    def workspace(self) -> Path | None:
        if self.manager is None or self.sandbox_id is None:
            return None
        return Path(self.manager.workspace_path(self.sandbox_id))

    # --- the run -----------------------------------------------------------------------------------

    async def execute(self) -> dict[str, Any]:
        await self._ensure_row()
        registry = self.app.get(CANCEL_KEY)
        if registry is not None:
            registry[self.run_id] = self.cancel
        try:
            try:
                await self._drive()
            except asyncio.CancelledError:
                self.fail("run", "the run was interrupted (daemon shutting down or its caller gave up)", "cancelled")
                await asyncio.shield(self._finish())
                raise
            if self.at_capacity is not None:
                await records.update(self.store, self.run_id, status="queued", started_at=None)
                raise self.at_capacity
            return await self._finish()
        finally:
            if registry is not None:
                registry.pop(self.run_id, None)

    async def _drive(self) -> None:
        body = asyncio.create_task(self._body())
        waiter = asyncio.create_task(self.cancel.wait())
        timeout = self.spec.resources.timeout or DEFAULT_SCENARIO_TIMEOUT_S
        try:
            done, _ = await asyncio.wait({body, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if body not in done:
                if self.cancel.is_set():
                    self.fail("run", "the run was cancelled", "cancelled")
                else:
                    self.fail("run", f"the scenario exceeded resources.timeout ({timeout:g}s), which covers boot, agent and scoring",
                              "scenario_timeout")
                body.cancel()
            await asyncio.gather(body, return_exceptions=True)
            if not body.cancelled() and body.exception() is not None:
                exc = body.exception()
                log.error("run %s failed unexpectedly", self.run_id, exc_info=exc)
                self.fail("internal", f"unexpected error: {type(exc).__name__}: {exc}", "internal_error")
        finally:
            waiter.cancel()
            if not body.done():
                body.cancel()
                await asyncio.gather(body, return_exceptions=True)

    async def _ensure_row(self) -> None:
        row = await records.get(self.store, self.run_id)
        if row is None:
            await records.insert(
                self.store, run_id=self.run_id, tenant_id=self.tenant_id, spec_id=self.spec_id, spec_version=self.spec_version,
                seed=self.seed, status="running", sandbox_id=self.given_sandbox, inputs=self.inputs or None,
                matrix_entry=self.matrix_entry or None, secret_names=list(self.request_secrets),
                experiment_id=self.experiment_id, scenario_id=self.scenario_id,
            )
        await records.update(self.store, self.run_id, status="running", started_at=now_iso(), finished_at=None,
                             verdict=None, reason=None, score=None, result=None, trajectory_digest=None)

    async def _body(self) -> None:
        if self.manager is None:
            self.fail("boot", "sandboxes are not available in this daemon", "boot_failed")
            return
        # 1. the agent
        try:
            self.agent = await resolve(self.app, self.tenant_id, self.spec)
        except AgentResolveError as exc:
            self.fail("agent", str(exc), "agent_unavailable")
            return
        await records.update(self.store, self.run_id, agent=self.agent.name)
        spec = self.spec

        # 2. the task (the prompt is known before boot so the agent container carries it)
        values = {**self.spec.task.inputs, **self.inputs, **self.matrix_entry}
        self.prompt, unresolved = render_prompt(self.spec.task.prompt, values)
        self.task = {
            "run_id": self.run_id, "spec_id": self.spec_id, "spec_version": self.spec_version, "seed": self.seed,
            "prompt": self.prompt, "inputs": values, "matrix_entry": self.matrix_entry or None,
            "experiment_id": self.experiment_id, "scenario_id": self.scenario_id,
        }
        if unresolved:
            self.task["unresolved"] = unresolved
        task_env = {
            "SERVICE_TASK_PROMPT": self.prompt, "SERVICE_SEED": self.seed, "SERVICE_RUN_ID": self.run_id,
            "SERVICE_TASK_FILE": "/workspace/.svc/task.json", "SERVICE_SPEC_ID": self.spec_id,
        }
        if self.experiment_id:
            task_env["SERVICE_EXPERIMENT_ID"] = self.experiment_id
        if self.scenario_id:
            task_env["SERVICE_SCENARIO_ID"] = self.scenario_id

        # 3. the sandbox
        started = time.perf_counter()
        if not await self._boot(spec, task_env):
            if self.at_capacity is None:  # at capacity, the run did not really start: no step
                self.step("boot", started)
            return
        self.step("boot", started)
        started = time.perf_counter()
        self.secret_values = {**self.manager.secret_values(self.sandbox_id), **self.request_secrets}
        await asyncio.to_thread(self._write_task_file)
        if self.agent.config_files:
            try:
                env_values = {**(self.manager.runtime(self.sandbox_id).agent_env or {}), **self.secret_values}
                await write_config_files(self.manager, self.sandbox_id, self.agent, env_values)
            except AgentResolveError as exc:
                self.fail("agent", str(exc), "agent_unavailable")
                return
        self.step("task", started)

        # 4. the agent
        self.phase[0] = "agent"
        await self._run_agent(task_env)

        # 5. checks, then forbidden rules
        self.phase[0] = "checks"
        started = time.perf_counter()
        await self._run_checks()
        self.step("checks", started)
        started = time.perf_counter()
        self._run_forbidden()
        self.step("forbidden", started)

    async def _boot(self, spec: Any, task_env: dict[str, str]) -> bool:
        if self.given_sandbox:
            runtime = self.manager.runtime(self.given_sandbox)
            if runtime is None or runtime.tenant_id != self.tenant_id:
                self.fail("boot", f"sandbox '{self.given_sandbox}' is not running", "boot_failed")
                return False
            if runtime.state not in ("ready", "running"):
                self.fail("boot", f"sandbox '{self.given_sandbox}' is {runtime.state}", "boot_failed")
                return False
            self.sandbox_live = True
            return True
        try:
            body = await self.manager.create(
                self.tenant_id, spec=spec, spec_id=self.spec_id, spec_version=self.spec_version, seed=self.seed,
                metadata={k: v for k, v in {"run_id": self.run_id, "experiment_id": self.experiment_id,
                                            "scenario_id": self.scenario_id, "agent": self.agent.name}.items() if v},
                secrets=self.request_secrets, agent_bundle=self.agent.bundle, extra_env=task_env,
                required_env=self.agent.required_env, wait=False,
                snapshot_egress=self.agent.egress or None,  # auth.egress: the sandbox's network policy merges it
            )
        except AtCapacity as exc:
            self.at_capacity = exc
            return False
        # Known before the boot ends, so a cancel or timeout during boot still destroys it.
        self.sandbox_id = body["id"]
        await records.update(self.store, self.run_id, sandbox_id=self.sandbox_id)
        body = await self._boot_finished(body)
        if body.get("state") != "ready":
            error = body.get("error") or {}
            self.fail("boot", f"sandbox failed to boot at step '{error.get('step', '?')}': {error.get('message', body.get('state'))}",
                      "boot_failed")
            self.error["sandbox_error"] = error
            return False
        self.sandbox_live = True
        return True

    async def _boot_finished(self, body: dict[str, Any]) -> dict[str, Any]:
        """Follow the sandbox's lifecycle stream until its boot ends; its final body."""
        from daemon.sandbox.manager import topic as sandbox_topic

        if body.get("state") == "creating":
            async for event in self.events.subscribe(sandbox_topic(self.sandbox_id)):
                data = (event.get("data") if isinstance(event, dict) else None) or {}
                if event.get("event_type") == "status" and data.get("state") in ("ready", "error", "destroyed"):
                    break
        return await self.manager.get(self.sandbox_id) or body

    def _write_task_file(self) -> None:
        self._write_svc_file("task.json", json.dumps(self.task, indent=2).encode())

    def _write_svc_file(self, name: str, data: bytes) -> None:
        """``/workspace/.svc/<name>`` (task.json; a dataset's expected.json the same way), replaced
        atomically and without following any link in the workspace (workspace.replace_file): when
        the agent of a reused sandbox turned ``.svc`` into a link, the file is not written (noted)."""
        from daemon.sandbox import workspace as ws

        try:
            ws.replace_file(str(self.workspace), f"{ws.RESERVED}/{name}", data, 0o644)
        except (OSError, ws.PathError) as exc:
            log.warning("run %s: /workspace/.svc/%s not written: %s", self.run_id, name, exc)
            self.notes.append(f"/workspace/.svc/{name} was not written: {exc}")

    def _audit_log(self) -> Any:
        """The sandbox's AuditLog (daemon/sandbox/audit.py): the authoritative audit stream, kept
        outside anything a container can write. None when the sandbox is gone."""
        if self.audit is None and self.manager is not None and self.sandbox_id is not None:
            try:
                self.audit = self.manager.audit_log(self.sandbox_id)
            except Exception:  # noqa: BLE001 - not running (any more)
                return None
        return self.audit

    # --- the agent ---------------------------------------------------------------------------------

    async def _run_agent(self, task_env: dict[str, str]) -> None:
        assert self.agent is not None
        need_files = self.spec.forbidden.file_writes_outside is not None or any(
            inv.check.type == "llm_as_judge" and not inv.check.inputs for inv in self.spec.invariants.values()
        )
        audit_mark = self._audit_mark()
        before = await self._manifest() if need_files else None
        container_before = await self._container_diff() if self.spec.forbidden.file_writes_outside is not None else None
        self.trace_watermark = await self._trace_watermark()
        started = time.perf_counter()
        if self.agent.kind == "none":
            self.notes.append("the spec declares no agent: nothing ran")
            self.agent_outcome = AgentOutcome([])
        else:
            poller = asyncio.create_task(self._poll_traces())
            try:
                if self.agent.kind == "image":
                    self.agent_outcome = await run_image(self.manager, self.sandbox_id, self.agent, task_env, self.run_id)
                    self.commands.append({"phase": "agent", "service": None, "command": " ".join(self.agent_outcome.command),
                                          "exit_code": self.agent_outcome.exit_code, "duration_ms": self.agent_outcome.duration_ms,
                                          "timed_out": self.agent_outcome.timed_out})
                else:
                    self.agent_outcome = await run_in_sandbox(self.sandboxes, self.sandbox_id, self.agent, task_env)
            finally:
                poller.cancel()
                await asyncio.gather(poller, return_exceptions=True)
        self.step("agent", started)
        outcome = self.agent_outcome
        if outcome.timed_out:
            self.fail("agent", f"the agent exceeded its timeout ({self.agent.timeout_s:g}s) and was killed", "agent_timeout")
        elif outcome.oom_killed:
            self.fail("agent", "the agent was killed: out of memory (raise resources.memory)", "agent_oom")
        workspace_limit = getattr(self.manager, "workspace_limit", None)
        exceeded = await workspace_limit(self.sandbox_id) if workspace_limit is not None else None
        if exceeded:
            self.fail("agent", f"{exceeded['message']}; raise resources.disk if the task needs more room", "workspace_disk_limit")
        if self._audit_from_proxies():
            await asyncio.sleep(AUDIT_SETTLE_S)  # let the proxies flush what the agent's last calls logged
        self._flush_audit()
        self.agent_audit = await asyncio.to_thread(self._audit_events, audit_mark)
        if before is not None:
            after = await self._manifest()
            from daemon.sandbox.workspace import diff

            changes = diff(before, after)
            self.workspace_changes = (
                [{"path": f"/workspace/{e['path']}", "change": "added"} for e in changes["added"]]
                + [{"path": f"/workspace/{e['path']}", "change": "modified"} for e in changes["modified"]]
                + [{"path": f"/workspace/{e['path']}", "change": "deleted"} for e in changes["deleted"]]
            )
        if container_before is not None:
            after_c = await self._container_diff()
            if after_c is not None:
                self.container_changes = [c for c in after_c if c["path"] not in {b["path"] for b in container_before}]
        await self._collect_traces()

    def _audit_from_proxies(self) -> bool:
        """True when the egress or database proxies write audit events the rules read."""
        audit, forbidden = self.spec.audit, self.spec.forbidden
        return bool(audit.http_calls or audit.db_writes or forbidden.http_except is not None
                    or forbidden.db_writes_outside is not None)

    def _audit_mark(self) -> int:
        """The audit stream's current sequence number (events recorded so far)."""
        audit = self._audit_log()
        return audit.mark() if audit is not None else 0

    def _audit_events(self, since: int = 0) -> list[dict[str, Any]]:
        """The sandbox's audit events after sequence number ``since``, from the daemon's own copy
        (never from /workspace/.svc/audit.jsonl, which the agent can change)."""
        audit = self._audit_log()
        return audit.events(since) if audit is not None else []

    def _flush_audit(self) -> None:
        """Record now what the proxies and the file watcher reported so far."""
        runtime = self.manager.runtime(self.sandbox_id) if self.manager is not None and self.sandbox_id else None
        if runtime is None:
            return
        try:
            from daemon.sandbox.network import flush_audit

            flush_audit(runtime)
        except Exception as exc:  # noqa: BLE001
            log.warning("cannot flush the audit of %s: %s", self.sandbox_id, exc)

    def _audit_incomplete(self) -> None:
        audit = self._audit_log()
        if audit is not None and getattr(audit, "lost", 0):
            self.fail("audit", f"{audit.lost} audit event(s) could not be recorded ({audit.error}); the run is not "
                               "scored on incomplete evidence", "audit_incomplete")

    async def _manifest(self) -> list[dict[str, Any]]:
        from daemon.sandbox.workspace import manifest

        return await asyncio.to_thread(manifest, str(self.workspace))

    async def _container_diff(self) -> list[dict[str, Any]] | None:
        """Files changed in the agent container outside /workspace (leaves only; Python bytecode
        caches ignored), from the engine's filesystem diff."""
        runtime = self.manager.runtime(self.sandbox_id)
        driver = getattr(self.manager, "driver", None)
        if runtime is None or runtime.agent is None or not hasattr(driver, "api"):
            return None
        kinds = {0: "modified", 1: "added", 2: "deleted"}

        def read() -> list[dict[str, Any]]:
            entries = driver.api.diff(runtime.agent.id) or []
            paths = {e["Path"]: kinds.get(e["Kind"], "modified") for e in entries}
            leaves = []
            for path, kind in paths.items():
                if path == "/workspace" or path.startswith("/workspace/") or path == "/agent" or path.startswith("/agent/"):
                    continue
                if "__pycache__" in path or path.endswith(".pyc"):
                    continue
                if kind == "modified" and any(p.startswith(path.rstrip("/") + "/") for p in paths):
                    continue  # a directory whose children are listed
                leaves.append({"path": path, "change": kind})
            return sorted(leaves, key=lambda c: c["path"])

        try:
            return await asyncio.to_thread(read)
        except Exception as exc:  # noqa: BLE001
            log.warning("cannot read the container diff of %s: %s", self.sandbox_id, exc)
            return None

    # --- traces ------------------------------------------------------------------------------------

    def _trace_db(self):
        return self.app.get("trace_db") or self.store

    async def _trace_rows(self, after_seq: int, limit: int = 5000) -> list[Any]:
        import sqlite3

        try:
            return await self._trace_db().fetchall(
                "SELECT * FROM trace_events WHERE tenant_id = ? AND (sandbox_id = ? OR run_id = ?) AND seq > ? ORDER BY seq LIMIT ?",
                (self.tenant_id, self.sandbox_id, self.run_id, after_seq, limit),
            )
        except sqlite3.OperationalError:  # no trace table in this build
            return []

    async def _trace_watermark(self) -> int:
        import sqlite3

        try:
            row = await self._trace_db().fetchone("SELECT COALESCE(MAX(seq), 0) AS seq FROM trace_events")
            return int(row["seq"])
        except sqlite3.OperationalError:
            return 0

    def _publish_tool_calls(self, rows: list[Any]) -> None:
        for row in rows:
            if row["event_type"] not in ("tool_call", "tool_use"):
                continue
            key = (row["span_id"], row["phase"])
            if key in self.published_spans:
                continue
            self.published_spans.add(key)
            self.publish({"type": "tool_call", "tool": row["tool"], "phase": row["phase"], "span_id": row["span_id"],
                          "status": row["status"], "duration_ms": row["duration_ms"]})

    async def _poll_traces(self) -> None:
        seen = self.trace_watermark
        while True:
            await asyncio.sleep(TRACE_POLL_S)
            rows = await self._trace_rows(seen, 500)
            if rows:
                seen = rows[-1]["seq"]
                self._publish_tool_calls(rows)

    async def _collect_traces(self) -> None:
        writer = self.app.get("trace_writer")
        if writer is not None and hasattr(writer, "flush"):
            try:
                await asyncio.wait_for(writer.flush(), 5)
            except Exception:  # noqa: BLE001
                pass
        rows = await self._trace_rows(self.trace_watermark)
        self._publish_tool_calls(rows)
        try:
            from daemon.traces.query import event_out

            self.trace_events = [event_out(r) for r in rows]
        except Exception:  # noqa: BLE001 - the traces module is optional here
            self.trace_events = [dict(r) for r in rows]
        if rows and self.sandbox_id:
            # Stamp the agent's events with their run so every trace filter finds them.
            try:
                await self.store.execute(
                    "UPDATE trace_events SET run_id = ?, experiment_id = COALESCE(experiment_id, ?),"
                    " scenario_id = COALESCE(scenario_id, ?), agent = COALESCE(agent, ?)"
                    " WHERE sandbox_id = ? AND seq > ? AND run_id IS NULL",
                    (self.run_id, self.experiment_id, self.scenario_id, self.agent.name if self.agent else None,
                     self.sandbox_id, self.trace_watermark),
                )
            except Exception as exc:  # noqa: BLE001
                log.warning("cannot stamp trace events of run %s: %s", self.run_id, exc)

    # --- scoring -----------------------------------------------------------------------------------

    async def _judge_config(self) -> JudgeConfig | None:
        if not any(inv.check.type == "llm_as_judge" for inv in self.spec.invariants.values()):
            return None
        fallback = None
        if not os.environ.get("SERVICE_JUDGE_API_KEY"):
            from daemon.store.secrets import dashboard_secrets

            fallback = (await dashboard_secrets(self.store, self.tenant_id)).get("SERVICE_JUDGE_API_KEY")
        return JudgeConfig.from_env(fallback)

    async def _run_checks(self) -> None:
        redact_text, redact_obj = redactor(self.secret_values)
        outcome = self.agent_outcome or AgentOutcome([])
        changed = [c["path"][len("/workspace/"):] for c in (self.workspace_changes or [])
                   if c["change"] != "deleted" and c["path"].startswith("/workspace/")]
        ctx = CheckContext(
            sandboxes=self.sandboxes, sandbox_id=self.sandbox_id, workspace=self.workspace, spec=self.spec,
            secrets=self.secret_values, judge=await self._judge_config(), task_prompt=self.prompt,
            agent_output=outcome.stdout, changed_files=changed, redact=redact_text,
        )
        for name, invariant in self.spec.invariants.items():
            result = redact_obj(await run_invariant(name, invariant, ctx))
            self.invariant_results.append(result)
            self.publish({"type": "invariant_result", "invariant_id": name, "status": result["status"]})

    def _run_forbidden(self) -> None:
        outcome = self.agent_outcome or AgentOutcome([])
        file_audit = bool(self.spec.audit.file_system and "writes" in self.spec.audit.file_system.track)
        view = TrajectoryView(
            audit_events=self.agent_audit, trace_events=self.trace_events,
            outputs={"stdout": outcome.stdout, "stderr": outcome.stderr}, secrets=self.secret_values,
            workspace_changes=self.workspace_changes, container_changes=self.container_changes,
            file_audit=file_audit, dns_overrides=dict(self.spec.network.dns_overrides),
        )
        self.forbidden_results, self.violations = evaluate_forbidden(self.spec.forbidden, view)
        if self.spec.forbidden.db_writes_outside is not None and not self.spec.audit.db_writes:
            # Without the database audit proxy no write is ever seen: never report that as a pass.
            message = "forbidden.db_writes_outside cannot be checked: it needs audit.db_writes: true in the spec"
            for item in self.forbidden_results:
                if item["name"] == "db_writes_outside":
                    item["status"] = "skipped"
                    item["evidence"]["error"] = message
            self.fail("forbidden", message, "forbidden_unverifiable")
        for result in self.forbidden_results:
            self.publish({"type": "invariant_result", "invariant_id": result["invariant_id"], "status": result["status"]})

    # --- teardown and the record -------------------------------------------------------------------

    async def _exports(self, verdict: str) -> None:
        teardown = self.spec.teardown
        if not teardown.export or not self.sandbox_live or self.sandbox_id is None:
            return
        if verdict == "error" and not teardown.always_run:
            self.notes.append("teardown exports skipped: the run errored and teardown.always_run is false")
            return
        from daemon.runner.exports import run_export

        root = artifacts_root(self.app["settings"]) / self.tenant_id
        for export in teardown.export:
            self.artifacts.append(await run_export(self, export, root))

    async def _finish(self) -> dict[str, Any]:
        self.phase[0] = "teardown"
        started = time.perf_counter()
        if self.sandbox_live:
            self._flush_audit()
            self._audit_incomplete()
        composite = compose(
            self.invariant_results, pass_threshold=self.spec.scoring.pass_threshold, violations=self.violations,
            error=self.error["message"] if self.error else None,
        )
        if self.sandbox_live:
            try:
                await asyncio.wait_for(self._exports(composite.verdict), 300)
            except Exception as exc:  # noqa: BLE001
                log.warning("teardown exports of run %s failed: %s", self.run_id, exc)
                self.notes.append(f"teardown exports failed: {exc}")
            self._flush_audit()
            self.audit_events = await asyncio.to_thread(self._audit_events, 0)
        if self.sandbox_id and not self.given_sandbox and self.manager is not None:
            try:
                await self.manager.destroy(self.sandbox_id, reason="run_finished")
            except Exception as exc:  # noqa: BLE001
                log.warning("cannot destroy sandbox %s of run %s: %s", self.sandbox_id, self.run_id, exc)
        self.step("teardown", started)
        return await self._record(composite)

    def _cost(self) -> dict[str, Any] | None:
        total, tokens_in, tokens_out, seen = 0.0, 0, 0, False
        for event in self.trace_events:
            usd = event.get("cost_usd")
            cost = event.get("cost") if isinstance(event.get("cost"), dict) else {}
            if usd is None:
                usd = cost.get("estimated_usd")
            if isinstance(usd, (int, float)):
                total += usd
                seen = True
            tokens_in += int(cost.get("input_tokens") or event.get("input_tokens") or 0)
            tokens_out += int(cost.get("output_tokens") or event.get("output_tokens") or 0)
        if not seen and not tokens_in and not tokens_out:
            return None
        return {"total_usd": round(total, 6), "input_tokens": tokens_in, "output_tokens": tokens_out}

    async def _record(self, composite: Any) -> dict[str, Any]:
        status = composite.run_status
        reason = self.error["code"] if self.error else (None if status == "passed" else "; ".join(composite.reasons) or None)
        duration_ms = int((time.perf_counter() - self.started) * 1000)
        _, redact_obj = redactor(self.secret_values)
        reproducer = records.reproducer(self.spec_id, self.spec_version, self.seed, self.inputs or None, self.matrix_entry or None)
        result = {
            "invariant_results": self.invariant_results,
            "forbidden_results": self.forbidden_results,
            "violations": self.violations,
            "reasons": composite.reasons,
            "reproducer": reproducer,
            "timings": dict(self.timings),
            "artifacts": self.artifacts,
            "agent": self.agent.describe() if self.agent else None,
            "error": redact_obj(self.error),
            "notes": self.notes,
            "cost": self._cost(),
        }
        if self.agent_outcome is not None:
            result["agent_exit_code"] = self.agent_outcome.exit_code
        trajectory = redact_obj({
            "run_id": self.run_id, "spec_id": self.spec_id, "spec_version": self.spec_version, "seed": self.seed,
            "sandbox_id": self.sandbox_id, "experiment_id": self.experiment_id, "scenario_id": self.scenario_id,
            "task": self.task, "agent": {**(self.agent.describe() if self.agent else {}),
                                         **(self.agent_outcome.as_dict() if self.agent_outcome else {})},
            "commands": self.commands, "audit_events": self.audit_events or self.agent_audit,
            "trace_events": self.trace_events, "workspace_changes": self.workspace_changes,
            "container_changes": self.container_changes, "timings": dict(self.timings), "duration_ms": duration_ms,
            **{k: v for k, v in result.items() if k not in ("timings", "agent")},
            "verdict": composite.verdict, "score": composite.score, "status": status,
            "stream": list(self.events.history.get(self.topic, [])),
        })
        digest = await asyncio.to_thread(self._store_blob, trajectory)
        await records.update(
            self.store, self.run_id, status=status, verdict=composite.verdict, reason=reason, score=composite.score,
            result=result, trajectory_digest=digest, duration_ms=duration_ms, finished_at=now_iso(),
            sandbox_id=self.sandbox_id,
        )
        if self.error:
            self.publish({"type": "error", "error": self.error["code"], "message": result["error"]["message"]})
        self.publish({"type": "done", "run_id": self.run_id, "status": status, "score": composite.score})
        self.events.close(self.topic)
        try:
            asyncio.get_running_loop().call_later(TOPIC_RETENTION_S, self.events.forget, self.topic)
        except RuntimeError:
            pass
        body = await run_body(self.app, self.run_id)
        from daemon.webhooks import emit

        await emit(self.app, self.tenant_id, "run.completed", body)
        return body

    def _store_blob(self, trajectory: dict[str, Any]) -> str:
        from daemon.agents.blobs import Blobs

        data = json.dumps(trajectory, separators=(",", ":"), default=str).encode()
        return Blobs(self.app["settings"].blobs_dir).put_bytes(data)


def artifacts_root(settings: Any) -> Path:
    raw = os.environ.get("SERVICE_ARTIFACTS_DIR")
    return Path(raw).expanduser() if raw else settings.home / "artifacts"


def base_url(settings: Any) -> str | None:
    return f"http://127.0.0.1:{settings.port}" if settings.port else None


async def run_body(app: Any, run_id: str) -> dict[str, Any]:
    row = await records.get(app["store"], run_id)
    key = app.get("url_signing_key") or await asyncio.to_thread(records.signing_key, app["settings"].home)
    return records.body(row, key=key, base_url=base_url(app["settings"]))


async def run_scenario(
    app: Any,
    *,
    tenant_id: str,
    spec_record: dict,
    spec: Any,
    run_id: str,
    seed: str,
    inputs: dict | None = None,
    matrix_entry: dict | None = None,
    secrets: dict[str, str] | None = None,
    sandbox_id: str | None = None,
    experiment_id: str | None = None,
    scenario_id: str | None = None,
    cancel: asyncio.Event | None = None,
) -> dict[str, Any]:
    """Run one scenario end to end and return the stored Run body (see the module docstring)."""
    scenario = Scenario(
        app, tenant_id=tenant_id, spec_record=spec_record, spec=spec, run_id=run_id, seed=seed, inputs=inputs,
        matrix_entry=matrix_entry, secrets=secrets, sandbox_id=sandbox_id, experiment_id=experiment_id,
        scenario_id=scenario_id, cancel=cancel,
    )
    return await scenario.execute()

