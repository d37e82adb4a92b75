"""The phases of a scenario run, as functions of its :class:`~daemon.runner.state.ScenarioState`:
boot (sandbox, task file), agent (run it, then what it changed), audit (the daemon's own copy of
the sandbox's audit stream), traces (the agent's trace events), scoring (invariant checks, then
forbidden rules) and record (teardown exports, score, trajectory blob, run row, stream, webhook).
:mod:`daemon.runner.scenario` runs them in order."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from daemon.contract.runs import Run
from daemon.errors import AtCapacity, NotFound
from daemon.runner import models, records
from daemon.runner.agent import AgentOutcome, run_image, run_in_sandbox
from daemon.runner.exports import run_export
from daemon.runner.request import RunOutcome
from daemon.runner.state import (
    AUDIT_SETTLE_S,
    TOPIC_RETENTION_S,
    TRACE_POLL_S,
    ScenarioState,
    artifacts_root,
    body_of,
    redactor,
)
from daemon.sandbox.engine import connection_failure, engine_failure
from daemon.sandbox.verifier import diff_leaves
from daemon.scoring.checks import CheckContext, InvariantOutcome, JudgeConfig, run_invariant
from daemon.scoring.composite import Composite, compose
from daemon.scoring.forbidden import TrajectoryView
from daemon.scoring.forbidden import evaluate as evaluate_forbidden
from daemon.store import runs as run_store
from daemon.util import now_iso
from daemon.appkeys import SETTINGS, TRACE_DB, TRACE_WRITER

if TYPE_CHECKING:
    from daemon.sandbox.audit import AuditLog
    from daemon.sandbox.manager import SandboxManager
    from daemon.spec.models import SpecDocument

log = logging.getLogger("svcd.runner")


# --- boot ------------------------------------------------------------------------------------------


async def boot(s: ScenarioState, spec: SpecDocument, task_env: dict[str, str]) -> bool:
    manager, agent = s.manager, s.agent
    assert manager is not None and agent is not None, "run_phases checks both first"
    if s.given_sandbox:
        try:
            given = manager.open(s.given_sandbox)
        except NotFound:
            given = None
        if given is None or given.tenant_id != s.tenant_id:
            s.fail("boot", f"sandbox '{s.given_sandbox}' is not running", "boot_failed")
            return False
        if given.runtime.state not in ("ready", "running"):
            s.fail("boot", f"sandbox '{s.given_sandbox}' is {given.runtime.state}", "boot_failed")
            return False
        s.attach(given)
        s.sandbox_live = True
        return True
    try:
        booting = await manager.boot(
            s.tenant_id, spec=spec, spec_id=s.spec_id, spec_version=s.spec_version, seed=s.seed,
            image=agent.base_image,  # an installed agent's layer on the spec's base
            metadata={k: v for k, v in {"run_id": s.run_id, "experiment_id": s.experiment_id,
                                        "scenario_id": s.scenario_id, "agent": agent.name}.items() if v},
            secrets=s.request_secrets, agent_bundle=agent.bundle, extra_env=task_env,
            required_env=agent.required_env,
            snapshot_egress=agent.egress or None,  # auth.egress: the sandbox's network policy merges it
        )
    except AtCapacity as exc:
        s.at_capacity = exc
        return False
    # Known before the boot ends, so a cancel or timeout during boot still destroys it.
    s.sandbox_id = booting.id
    await s.save(sandbox_id=s.sandbox_id)
    booted = await booting.result()
    if booted.sandbox is None:
        error = booted.error or {}
        s.fail("boot", f"sandbox failed to boot at step '{error.get('step', '?')}': {error.get('message', booted.state)}",
               "boot_failed")
        assert s.error is not None
        s.error["sandbox_error"] = error
        return False
    s.attach(booted.sandbox)
    s.sandbox_live = True
    return True


async def write_task_file(s: ScenarioState) -> None:
    await write_svc_file(s, "task.json", json.dumps(s.task, indent=2).encode())


async def write_svc_file(s: ScenarioState, name: str, data: bytes) -> None:
    """``/workspace/.svc/<name>`` (task.json; a dataset's expected.json the same way), replaced
    atomically and without following any link in the workspace (workspace.replace_file): when
    the agent of a reused sandbox turned ``.svc`` into a link, the file is not written (noted)."""
    from daemon.sandbox import workspace as ws

    assert s.sandbox is not None
    try:
        await s.sandbox.write_reserved(name, data)
    except (OSError, ws.PathError) as exc:
        log.warning("run %s: /workspace/.svc/%s not written: %s", s.run_id, name, exc)
        s.notes.append(f"/workspace/.svc/{name} was not written: {exc}")


# --- agent -----------------------------------------------------------------------------------------


async def run_agent(s: ScenarioState, task_env: dict[str, str]) -> None:
    assert s.agent is not None and s.sandbox is not None
    sandbox = s.sandbox
    need_files = s.spec.forbidden.file_writes_outside is not None or any(
        inv.check.type == "llm_as_judge" and not inv.check.inputs for inv in s.spec.invariants.values()
    )
    if s.given_sandbox:  # an earlier run in this sandbox ended its agent's database sessions
        await sandbox.allow_agent_sessions()
    await flush_audit(s)  # what the setup wrote (read from the databases' slots lazily) is before the mark
    mark = s.audit_mark = audit_mark(s)
    before = await workspace_manifest(s) if need_files else None
    container_before = await container_diff(s) if s.spec.forbidden.file_writes_outside is not None else None
    s.trace_watermark = await trace_watermark(s)
    started = time.perf_counter()
    if s.agent.kind == "none":
        s.notes.append("the spec declares no agent: nothing ran")
        s.agent_outcome = AgentOutcome([])
    else:
        poller = asyncio.create_task(poll_traces(s))
        disk_watch = asyncio.create_task(watch_container_disk(s))
        try:
            if s.agent.kind == "image":
                s.agent_outcome = await run_image(sandbox, s.agent, task_env, s.run_id)
                s.commands.append({"phase": "agent", "service": None, "command": " ".join(s.agent_outcome.command),
                                   "exit_code": s.agent_outcome.exit_code, "duration_ms": s.agent_outcome.duration_ms,
                                   "timed_out": s.agent_outcome.timed_out})
            else:
                s.agent_outcome = await run_in_sandbox(sandbox, s.agent, task_env)
        finally:
            poller.cancel()
            disk_watch.cancel()
            await asyncio.gather(poller, disk_watch, return_exceptions=True)
    s.step("agent", started)
    await models.settle(s)  # a refused model call (budget, replay divergence) decides the error first
    started = time.perf_counter()
    if s.agent.kind != "none" and not keeps_running(s):
        await stop_leftovers(s)
        s.clock("leftovers", started)
        started = time.perf_counter()
    if s.agent.kind != "none" and s.container_disk is None:
        await measure_container_disk(s)
    if s.container_disk is not None:
        limit = sandbox.runtime.limits.disk
        s.fail("agent", f"the agent wrote {s.container_disk} bytes outside /workspace, over the sandbox's "
                        f"{limit}-byte disk limit (resources.disk); it was stopped", "container_disk_limit")
    outcome = s.agent_outcome
    if outcome.timed_out:
        s.fail("agent", f"the agent exceeded its timeout ({s.agent.timeout_s:g}s) and was killed", "agent_timeout")
    elif outcome.oom_killed:
        s.fail("agent", "the agent was killed: out of memory (raise resources.memory)", "agent_oom")
    exceeded = await sandbox.workspace_limit()
    if exceeded:
        s.fail("agent", f"{exceeded['message']}; raise resources.disk if the task needs more room", "workspace_disk_limit")
    if audit_from_proxies(s):
        await asyncio.sleep(AUDIT_SETTLE_S)  # let the egress proxy flush what the agent's last calls logged
    await flush_audit(s)
    s.agent_audit = await asyncio.to_thread(audit_events, s, mark)
    if before is not None:
        after = await workspace_manifest(s)
        from daemon.sandbox.workspace import diff

        changes = diff(before, after)
        s.workspace_changes = (
            [{"path": f"/workspace/{e['path']}", "change": "added"} for e in changes["added"]]
            + [{"path": f"/workspace/{e['path']}", "change": "modified"} for e in changes["modified"]]
            + [{"path": f"/workspace/{e['path']}", "change": "deleted"} for e in changes["deleted"]]
        )
    if container_before is not None:
        after_c = await container_diff(s)
        if after_c is not None:
            s.container_changes = [c for c in after_c if c["path"] not in {b["path"] for b in container_before}]
    await ingest_dropped_traces(s)
    await collect_traces(s)
    s.clock("snapshot", started)  # what the agent changed: audit drain, workspace and container diffs, traces


CONTAINER_DISK_POLL_S = 2.0


async def measure_container_disk(s: ScenarioState) -> bool:
    """What the agent wrote outside its mounts (the container's writable layer, on the host's disk)
    against `resources.disk`; over it: `s.container_disk` is set. True when over."""
    if s.sandbox is None:
        return False
    try:
        size = await s.sandbox.writable_layer_size()
    except Exception as exc:  # noqa: BLE001 - the engine is busy: next round
        log.debug("cannot measure the writable layer of %s: %s", s.sandbox_id, exc)
        return False
    if size is not None and size > s.sandbox.runtime.limits.disk:
        s.container_disk = size
        return True
    return False


async def watch_container_disk(s: ScenarioState) -> None:
    """While the agent runs: past `resources.disk` outside /workspace, every process of it is stopped."""
    while True:
        await asyncio.sleep(CONTAINER_DISK_POLL_S)
        if await measure_container_disk(s):
            # its own task: cancelling this watch when the agent ends must not cut the reaper short
            # (stop_leftovers waits for it; two reapers at once would kill each other)
            assert s.sandbox is not None
            s.disk_stop = asyncio.ensure_future(s.sandbox.stop_leftovers())
            await asyncio.shield(s.disk_stop)
            return


def keeps_running(s: ScenarioState) -> bool:
    return bool(s.spec.agent is not None and s.spec.agent.keep_running)


async def stop_leftovers(s: ScenarioState) -> None:
    """Stop what the agent left running (daemon/sandbox/leftovers.py) before the after-snapshot,
    `expected.json`, the checks and the last db drain. A leftover that cannot be stopped makes the
    run an error: nothing measured after it could be trusted."""
    try:
        if s.disk_stop is not None:
            await asyncio.gather(s.disk_stop, return_exceptions=True)
        assert s.sandbox is not None
        killed = await s.sandbox.stop_leftovers()
    except Exception as exc:  # noqa: BLE001
        await leftovers_failed(s, exc)
        return
    if killed:
        s.notes.append(f"{killed} process(es) the agent left running were stopped when it ended "
                       "(agent.keep_running: true keeps them)")


async def leftovers_failed(s: ScenarioState, exc: Exception) -> None:
    """The reaper could not run. Whose doing that is comes from what the daemon observed, never from
    the error's words: its own connection to the engine broke (the engine's fault: retried), or the
    agent container is no longer running although the daemon stopped nothing (the agent ended its own
    keep-alive: a failure of the agent's, recorded as the violation `agent_stopped_container`)."""
    assert s.sandbox is not None
    outcome = s.agent_outcome
    if (outcome is not None and outcome.engine_lost) or connection_failure(exc):
        s.fail("agent", f"the engine failed while the agent's leftovers were stopped: {type(exc).__name__}", "engine_error")
        return
    try:
        running = await s.sandbox.agent_running()
    except Exception as probe:  # noqa: BLE001
        s.fail("agent", f"the engine cannot tell the agent container's state: {type(probe).__name__}", "engine_error")
        return
    if running is not False and engine_failure(exc):
        s.fail("agent", f"the engine failed while the agent's leftovers were stopped: {type(exc).__name__}", "engine_error")
        return
    if running is False and s.sandbox_live:
        s.agent_faults.append({"rule": "agent_stopped_container", "code": "invariant_violation", "source": "engine",
                               "message": "the agent stopped its own container (its keep-alive ended while the daemon "
                                          "stopped nothing): nothing after it can be measured", "event": {}})
        return
    s.fail("agent", f"cannot stop what the agent left running: {exc}", "agent_leftovers")


async def workspace_manifest(s: ScenarioState) -> list[dict[str, Any]]:
    assert s.sandbox is not None
    return await s.sandbox.manifest()


async def container_diff(s: ScenarioState) -> list[dict[str, Any]] | None:
    """Files changed in the agent container outside /workspace (leaves only; Python bytecode
    caches ignored), from the engine's filesystem diff."""
    if s.sandbox is None:
        return None
    try:
        entries = await s.sandbox.container_changes()
        return await asyncio.to_thread(diff_leaves, entries) if entries is not None else None
    except Exception as exc:  # noqa: BLE001
        log.warning("cannot read the container diff of %s: %s", s.sandbox_id, exc)
        return None


# --- audit -----------------------------------------------------------------------------------------


def audit_log(s: ScenarioState) -> AuditLog | None:
    """The sandbox's AuditLog (daemon/sandbox/audit.py): the authoritative audit stream, kept
    outside anything a container can write. None when the sandbox is gone."""
    if s.audit is None and s.sandbox is not None:
        try:
            s.audit = s.sandbox.audit()
        except NotFound:
            return None
    return s.audit


def audit_from_proxies(s: ScenarioState) -> bool:
    """True when the egress proxy writes audit events the rules read (the databases' writes are read
    from their slots by flush_audit, with nothing in flight)."""
    audit, forbidden = s.spec.audit, s.spec.forbidden
    return bool(audit.http_calls or forbidden.sees_http_calls())


def audit_mark(s: ScenarioState) -> int:
    """The audit stream's current sequence number (events recorded so far)."""
    audit = audit_log(s)
    return audit.mark() if audit is not None else 0


def audit_events(s: ScenarioState, since: int = 0) -> list[dict[str, Any]]:
    """The sandbox's audit events after sequence number ``since``, from the daemon's own copy
    (never from /workspace/.svc/audit.jsonl, which the agent can change)."""
    audit = audit_log(s)
    return audit.events(since) if audit is not None else []


def shown_audit(s: ScenarioState, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The audit events the trajectory shows: those whose spec `audit` switch is on. Scoring
    and forbidden rules read every event (`audit_events`)."""
    from daemon.sandbox.audit import hidden_types

    audit = audit_log(s)
    if audit is not None:
        return audit.visible(events)
    hidden = hidden_types(s.spec.audit) if s.spec is not None else set()
    return [e for e in events if e.get("type") not in hidden]


async def flush_audit(s: ScenarioState) -> None:
    """Record now what the proxies, the databases and the file watcher reported so far."""
    if s.sandbox is None:
        return
    try:
        await s.sandbox.flush_audit()
    except Exception as exc:  # noqa: BLE001
        log.warning("cannot flush the audit of %s: %s", s.sandbox_id, exc)


def audit_incomplete(s: ScenarioState) -> None:
    audit = audit_log(s)
    if audit is not None and audit.lost:
        s.fail("audit", f"{audit.lost} audit event(s) could not be recorded ({audit.error}); the run is not "
                        "scored on incomplete evidence", "audit_incomplete")


# --- traces ----------------------------------------------------------------------------------------


def trace_db(s: ScenarioState) -> Any:
    return s.app.get(TRACE_DB) or s.store


async def trace_rows(s: ScenarioState, after_seq: int, limit: int = 5000) -> list[Any]:
    import sqlite3

    from daemon.store import traces as trace_store

    try:
        return await trace_store.run_rows_after(trace_db(s), s.tenant_id, s.sandbox_id, s.run_id, after_seq, limit)
    except sqlite3.OperationalError:  # no trace table in this build
        return []


async def trace_watermark(s: ScenarioState) -> int:
    import sqlite3

    from daemon.store import traces as trace_store

    try:
        return int(await trace_store.max_seq(trace_db(s)))
    except sqlite3.OperationalError:
        return 0


def publish_tool_calls(s: ScenarioState, rows: list[Any]) -> None:
    for row in rows:
        if row["event_type"] not in ("tool_call", "tool_use"):
            continue
        key = (row["span_id"], row["phase"])
        if key in s.published_spans:
            continue
        s.published_spans.add(key)
        s.publish({"type": "tool_call", "tool": row["tool"], "phase": row["phase"], "span_id": row["span_id"],
                   "status": row["status"], "duration_ms": row["duration_ms"]})


async def poll_traces(s: ScenarioState) -> None:
    seen = s.trace_watermark
    while True:
        await asyncio.sleep(TRACE_POLL_S)
        rows = await trace_rows(s, seen, 500)
        if rows:
            seen = rows[-1]["seq"]
            publish_tool_calls(s, rows)


async def ingest_dropped_traces(s: ScenarioState) -> None:
    """An agent on a swarm node drops its trace batches in a file (daemon/traces/drop.py): stored
    now, before the run's events are read."""
    if s.sandbox is None:
        return
    from daemon.traces import drop

    try:
        await drop.ingest(s.app, s.sandbox.runtime)
    except Exception:  # noqa: BLE001 - traces never fail a run
        log.exception("ingesting the dropped traces of %s failed", s.sandbox_id)


async def collect_traces(s: ScenarioState) -> None:
    writer = s.app.get(TRACE_WRITER)
    if writer is not None and hasattr(writer, "flush"):
        try:
            await asyncio.wait_for(writer.flush(), 5)
        except Exception:  # noqa: BLE001
            pass
    rows = await trace_rows(s, s.trace_watermark)
    publish_tool_calls(s, rows)
    try:
        from daemon.traces.query import event_out

        s.trace_events = [event_out(r) for r in rows]
    except Exception:  # noqa: BLE001 - the traces module is optional here
        s.trace_events = [dict(r) for r in rows]
    if rows and s.sandbox_id:
        # Stamp the agent's events with their run so every trace filter finds them.
        try:
            from daemon.store import traces as trace_store

            await trace_store.stamp_run(s.store, s.sandbox_id, s.trace_watermark, s.run_id, s.experiment_id,
                                        s.scenario_id, s.agent.name if s.agent else None)
        except Exception as exc:  # noqa: BLE001
            log.warning("cannot stamp trace events of run %s: %s", s.run_id, exc)


# --- scoring ---------------------------------------------------------------------------------------


async def judge_config(s: ScenarioState) -> JudgeConfig | None:
    if not any(inv.check.type == "llm_as_judge" for inv in s.spec.invariants.values()):
        return None
    fallback = None
    if not os.environ.get("SERVICE_JUDGE_API_KEY"):
        from daemon.store.secrets import dashboard_secrets

        fallback = (await dashboard_secrets(s.store, s.tenant_id)).get("SERVICE_JUDGE_API_KEY")
    return JudgeConfig.from_env(fallback)


EXPECTED_FILE = "/workspace/.svc/expected.json"


async def write_expected_file(s: ScenarioState) -> bool:
    """A dataset record's `expected`, written after the agent ran and what it left was stopped (it
    never sees it) and before the checks; False when it could not be written (the agent turned
    `.svc` into a link). Not written when the agent's processes keep running (`agent.keep_running`):
    checks then get it only in their context."""
    if keeps_running(s):
        s.notes.append(f"{EXPECTED_FILE} is not written: agent.keep_running leaves the agent's processes running")
        return True
    notes = len(s.notes)
    await write_svc_file(s, "expected.json", json.dumps((s.dataset_record or {}).get("expected"), indent=2).encode())
    return len(s.notes) == notes


async def run_checks(s: ScenarioState) -> None:
    if s.dataset_record is not None and not await write_expected_file(s):
        s.fail("checks", f"{EXPECTED_FILE} could not be written, so the checks cannot compare with the record", "expected_unwritable")
        return
    assert s.sandbox is not None
    if s.agent_faults:
        s.notes.append("the checks did not run: the agent stopped its own container")
        return
    if not await environment_trusted(s):
        return
    redact_text, redact_obj = redactor(s.secret_values)
    outcome = s.agent_outcome or AgentOutcome([])
    changed = [c["path"][len("/workspace/"):] for c in (s.workspace_changes or [])
               if c["change"] != "deleted" and c["path"].startswith("/workspace/")]
    ctx = CheckContext(
        sandbox=s.sandbox, spec=s.spec,
        secrets=s.secret_values, judge=await judge_config(s), task_prompt=s.prompt,
        agent_output=outcome.stdout, changed_files=changed, redact=redact_text,
        agent_audit=list(s.agent_audit),  # what the agent did, not what earlier checks or runs did
        **({"expected": s.dataset_record.get("expected"), "expected_file": EXPECTED_FILE} if s.dataset_record is not None else {}),
    )
    for name, invariant in s.spec.invariants.items():
        checked = await run_invariant(name, invariant, ctx)
        result = InvariantOutcome.model_validate(redact_obj(checked.model_dump()))
        s.invariant_results.append(result)
        s.publish({"type": "invariant_result", "invariant_id": name, "status": result.status})
    if keeps_running(s):
        # the agent's processes ran beside the checks: what they replaced meanwhile (a copy-up stays in
        # the diff even when the content is put back) voids the checks that ran in its container
        await environment_trusted(s)


COMMAND_CHECKS = ("command_exit", "custom")


async def environment_trusted(s: ScenarioState) -> bool:
    """A command check that runs in the agent's container runs the image's programs: when the engine's
    diff shows the agent replaced or shadowed one (daemon/sandbox/verifier.py), no such check is
    trusted and the run errs with `environment_tampered` naming the files, unless those checks run
    `isolation: clean`. False when the run erred."""
    assert s.sandbox is not None
    in_agent = sorted(name for name, inv in s.spec.invariants.items()
                      if inv.check.type in COMMAND_CHECKS and getattr(inv.check, "isolation", "agent") == "agent")
    if not in_agent or s.agent is None or s.agent.kind == "none":
        return True
    try:
        tampered = await s.sandbox.tampered_paths()
    except Exception as exc:  # noqa: BLE001 - the engine failed: the checks cannot be vouched for
        s.fail("checks", f"cannot read what the agent changed in its container: {exc}", "engine_error")
        return False
    if tampered is None:
        s.notes.append("this engine does not report container changes: command checks ran in the agent's container "
                       "unverified (isolation: clean runs them in a fresh container)")
        return True
    if tampered:
        shown = ", ".join(tampered[:10]) + (f" and {len(tampered) - 10} more" if len(tampered) > 10 else "")
        s.fail("checks", f"the agent replaced or shadowed programs of its image ({shown}), so the command checks "
                         f"{', '.join(in_agent)} cannot run in its container; give them `isolation: clean` to run "
                         "them in a fresh container from the spec's image", "environment_tampered")
        return False
    return True


async def audit_leftovers(s: ScenarioState) -> None:
    """With `agent.keep_running`, what the agent's processes did until the checks ended counts too."""
    if not keeps_running(s):
        return
    await flush_audit(s)
    s.agent_audit = await asyncio.to_thread(audit_events, s, s.audit_mark)


def run_forbidden(s: ScenarioState) -> None:
    outcome = s.agent_outcome or AgentOutcome([])
    file_audit = bool(s.spec.audit.file_system and "writes" in s.spec.audit.file_system.track)
    view = TrajectoryView(
        audit_events=s.agent_audit, trace_events=s.trace_events,
        outputs={"stdout": outcome.stdout, "stderr": outcome.stderr}, secrets=s.secret_values,
        workspace_changes=s.workspace_changes, container_changes=s.container_changes,
        file_audit=file_audit, dns_overrides=dict(s.spec.network.dns_overrides),
    )
    s.forbidden_results, s.violations = evaluate_forbidden(s.spec.forbidden, view)
    s.violations.extend(s.agent_faults)
    if s.spec.forbidden.db_writes_outside is not None and not s.spec.audit.db_writes:
        # Without the database audit proxy no write is ever seen: never report that as a pass.
        message = "forbidden.db_writes_outside cannot be checked: it needs audit.db_writes: true in the spec"
        for item in s.forbidden_results:
            if item["name"] == "db_writes_outside":
                item["status"] = "skipped"
                item["evidence"]["error"] = message
        s.fail("forbidden", message, "forbidden_unverifiable")
    for result in s.forbidden_results:
        s.publish({"type": "invariant_result", "invariant_id": result["invariant_id"], "status": result["status"]})


# --- teardown and the record -----------------------------------------------------------------------


async def run_exports(s: ScenarioState, verdict: str) -> None:
    teardown = s.spec.teardown
    if not teardown.export or not s.sandbox_live or s.sandbox is None:
        return
    if verdict == "error" and not teardown.always_run:
        s.notes.append("teardown exports skipped: the run errored and teardown.always_run is false")
        return
    root = artifacts_root(s.app[SETTINGS]) / s.tenant_id
    for export in teardown.export:
        s.artifacts.append(await run_export(s.sandbox, export, root, spec=s.spec, run_id=s.run_id,
                                            scenario_id=s.scenario_id))


async def finish(s: ScenarioState) -> RunOutcome:
    s.set_phase("teardown")
    started = time.perf_counter()
    if s.sandbox_live:
        await flush_audit(s)
        audit_incomplete(s)
    composite = compose(
        [r.model_dump() for r in s.invariant_results], pass_threshold=s.spec.scoring.pass_threshold, violations=s.violations,
        error=s.error["message"] if s.error else None,
    )
    if s.sandbox_live:
        exporting = time.perf_counter()
        try:
            await asyncio.wait_for(run_exports(s, composite.verdict), 300)
        except Exception as exc:  # noqa: BLE001
            log.warning("teardown exports of run %s failed: %s", s.run_id, exc)
            s.notes.append(f"teardown exports failed: {exc}")
        if s.spec.teardown.export:
            s.clock("exports", exporting)
        await flush_audit(s)
        s.audit_events = await asyncio.to_thread(audit_events, s, 0)
    manager, sandbox_id = s.manager, s.sandbox_id
    own = manager is not None and sandbox_id is not None and not s.given_sandbox
    if own and not s.sandbox_live:  # a boot that failed or was cancelled: released before the answer
        assert manager is not None and sandbox_id is not None
        await destroy_quietly(manager, sandbox_id, s.run_id)
    s.step("teardown", started)
    s.timings["teardown_ms"] -= s.timings.get("exports_ms", 0)  # the budget lists exports apart
    try:
        return await record(s, composite)
    finally:
        if own and s.sandbox_live and manager is not None and sandbox_id is not None:
            # after the verdict is stored, off the run's critical path (the sandbox keeps its
            # capacity slot until it is gone; daemon shutdown destroys what is left)
            manager.spawn(destroy_quietly(manager, sandbox_id, s.run_id))


async def destroy_quietly(manager: SandboxManager, sandbox_id: str, run_id: str) -> None:
    try:
        await manager.destroy(sandbox_id, reason="run_finished")
    except Exception as exc:  # noqa: BLE001
        log.warning("cannot destroy sandbox %s of run %s: %s", sandbox_id, run_id, exc)


def run_cost(s: ScenarioState) -> dict[str, Any] | None:
    total, tokens_in, tokens_out, seen = 0.0, 0, 0, False
    for event in s.trace_events:
        usd = event.get("cost_usd")
        cost = event.get("cost")
        if not isinstance(cost, dict):
            cost = {}
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


def dataset_ref(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """{id, version, record_id} of a dataset scenario's record, for its reproducer."""
    if not record or "dataset_id" not in record:
        return None
    return {"id": record["dataset_id"], "version": record.get("version"), "record_id": record["id"]}


async def record(s: ScenarioState, composite: Composite) -> RunOutcome:
    status = composite.run_status
    reason = s.error["code"] if s.error else (None if status == "passed" else "; ".join(composite.reasons) or None)
    duration_ms = int((time.perf_counter() - s.started) * 1000)
    _, redact_obj = redactor(s.secret_values)
    reproducer = records.reproducer(s.spec_id, s.spec_version, s.seed, s.inputs or None, s.matrix_entry or None,
                                    dataset_ref(s.dataset_record), s.pins)
    result = {
        "invariant_results": [r.model_dump() for r in s.invariant_results],
        "forbidden_results": s.forbidden_results,
        "violations": s.violations,
        "reasons": composite.reasons,
        "reproducer": reproducer,
        "timings": dict(s.timings),
        "artifacts": s.artifacts,
        "agent": s.agent.describe() if s.agent else None,
        "error": redact_obj(s.error),
        "notes": s.notes,
        "cost": run_cost(s),
    }
    if s.agent_outcome is not None:
        result["agent_exit_code"] = s.agent_outcome.exit_code
        if s.agent_outcome.engine_lost:
            result["agent_engine_lost"] = True
    trajectory = redact_obj({
        "run_id": s.run_id, "spec_id": s.spec_id, "spec_version": s.spec_version, "seed": s.seed,
        "sandbox_id": s.sandbox_id, "experiment_id": s.experiment_id, "scenario_id": s.scenario_id,
        "task": s.task, "agent": {**(s.agent.describe() if s.agent else {}),
                                     **(s.agent_outcome.as_dict() if s.agent_outcome else {})},
        "commands": s.commands, "audit_events": shown_audit(s, s.audit_events or s.agent_audit),
        "agent_audit_window": agent_audit_window(s),
        "trace_events": s.trace_events, "workspace_changes": s.workspace_changes,
        "container_changes": s.container_changes, "timings": dict(s.timings), "duration_ms": duration_ms,
        **{k: v for k, v in result.items() if k not in ("timings", "agent")},
        "verdict": composite.verdict, "score": composite.score, "status": status,
        "stream": list(s.events.history.get(s.topic, [])),
    })
    digest = await asyncio.to_thread(store_blob, s, trajectory)
    assert s.row is not None  # execute() started the row
    s.row = await run_store.finish(
        s.store, s.row, status=status, verdict=composite.verdict, reason=reason, score=composite.score,
        result=result, trajectory_digest=digest, duration_ms=duration_ms, finished_at=now_iso(),
        sandbox_id=s.sandbox_id, pins=dict(s.pins) if s.pins else None,
    )
    if s.error:
        s.publish({"type": "error", "error": s.error["code"], "message": result["error"]["message"]})
    s.publish({"type": "done", "run_id": s.run_id, "status": status, "score": composite.score})
    s.events.close(s.topic)
    try:
        asyncio.get_running_loop().call_later(TOPIC_RETENTION_S, s.events.forget, s.topic)
    except RuntimeError:
        pass
    body = await body_of(s.app, s.row)
    if not s.defer_webhook:
        from daemon.webhooks import emit

        await emit(s.app, s.tenant_id, "run.completed", body)
    engine_lost = s.agent_outcome is not None and s.agent_outcome.engine_lost
    return RunOutcome.of(Run.model_validate(body), agent_engine_lost=engine_lost)


def agent_audit_window(s: ScenarioState) -> list[int]:
    """[from, to): the agent's events (daemon/effects reads them) among the trajectory's `audit_events`."""
    start = len(shown_audit(s, s.audit_events[:s.audit_mark])) if s.audit_events else 0
    return [start, start + len(shown_audit(s, s.agent_audit))]


def store_blob(s: ScenarioState, trajectory: dict[str, Any]) -> str:
    from daemon.agents.blobs import Blobs

    data = json.dumps(trajectory, separators=(",", ":"), default=str).encode()
    return Blobs(s.app[SETTINGS].blobs_dir).put_bytes(data)
