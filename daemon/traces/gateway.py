"""The model gateway's calls as trace events, and where its recordings are kept.

Each line the gateway records (daemon/sandbox/model_gateway.py) becomes one `llm_call` event
(model, tokens, the daemon's price, latency, time to first token, status, error type) and one
`tool_use` event (phase `invoked`) per tool the model asked for, under the sandbox's trace
`gateway-<sandbox id>`, so the run view, metrics, alerts and score rules see the calls of an agent
that has no instrumentation at all. A refused call (budget, replay divergence) is an `llm_call`
with status `error` and its reason as `error_type`.

Recordings are content-addressed files per tenant under `$SERVICE_HOME/recordings/`: a run stores
the digest of the recording it made (or replayed); a replay finds it only under its own tenant.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from daemon.agents.blobs import Blobs
from daemon.appkeys import SANDBOXES, SETTINGS, STORE, TRACE_WRITER
from daemon.sandbox.model_gateway import STATE, GatewayState, ModelGatewayExtension
from daemon.sandbox.redact import Redactor
from daemon.sandbox.runtime import SandboxRuntime
from daemon.store import runs as run_store
from daemon.traces.ingest import prepare_events

log = logging.getLogger("svcd.traces")

SOURCE = "gateway"
TEXT_KEEP = 4096


def recordings(settings: Any, tenant_id: str) -> Blobs:
    tenant_dir = hashlib.sha256(tenant_id.encode()).hexdigest()[:32]
    return Blobs(Path(settings.home) / "recordings" / tenant_dir)


def trace_id(sandbox_id: str) -> str:
    return f"gateway-{sandbox_id}"


def _request_text(request: Any) -> Any:
    if not isinstance(request, dict):
        return None
    for key in ("messages", "input", "prompt"):
        if key in request:
            return request[key]
    return request


def _answer_text(line: dict[str, Any]) -> str | None:
    body = line.get("body")
    if isinstance(body, str):
        return body[:TEXT_KEEP]
    chunks = line.get("chunks")
    if isinstance(chunks, list):
        return "".join(c[1] for c in chunks if isinstance(c, list) and len(c) == 2 and isinstance(c[1], str))[:TEXT_KEEP]
    return None


def events_of(line: dict[str, Any], sb: SandboxRuntime) -> list[dict[str, Any]]:
    """TraceEventIn-shaped events for one gateway record line."""
    seq = line.get("seq")
    span = f"gw_{sb.id}_{seq}"
    refused = line.get("refused") if isinstance(line.get("refused"), dict) else None
    error = line.get("error") if isinstance(line.get("error"), dict) else None
    usage = line.get("usage") if isinstance(line.get("usage"), dict) else {}
    status = "error" if refused or error or (isinstance(line.get("status"), int) and line["status"] >= 400) else "ok"
    metadata = {k: line.get(k) for k in ("provider", "path", "seq", "ttft_ms", "stream", "status", "occurrence")
                if line.get(k) is not None}
    metadata["source"] = SOURCE
    if line.get("replayed"):
        metadata["replayed"] = True
    if refused:
        metadata["refused"] = refused
    event: dict[str, Any] = {
        "event_type": "llm_call", "phase": "complete", "trace_id": trace_id(sb.id), "span_id": span,
        "tool": f"{line.get('provider', '?')} {line.get('method', 'POST')} {line.get('path', '')}"[:200],
        "status": status, "input": _request_text(line.get("request")), "output": _answer_text(line),
        "metadata": metadata,
    }
    if isinstance(line.get("started"), (int, float)):
        event["ts"] = line["started"]
    if isinstance(line.get("latency_ms"), (int, float)):
        event["duration_ms"] = max(0.0, float(line["latency_ms"]))
    if status == "error":
        event["error_type"] = str((refused or {}).get("reason") or (error or {}).get("type") or f"http_{line.get('status')}")[:200]
    if line.get("model") or usage:
        event["cost"] = {"model": line.get("model"), "input_tokens": usage.get("input_tokens"),
                         "output_tokens": usage.get("output_tokens"), "cached_tokens": usage.get("cached_input_tokens")}
    if sb.metadata.get("agent"):
        event["agent"] = sb.metadata["agent"]
    events = [event]
    for call in line.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        events.append({
            "event_type": "tool_use", "phase": "invoked", "trace_id": trace_id(sb.id), "parent_span_id": span,
            "tool": str(call.get("name") or "?")[:200], "input": call.get("arguments"), "ts": event.get("ts"),
            "metadata": {"source": SOURCE, "call_id": call.get("id")},
        })
    for e in events:
        for key in ("run_id", "experiment_id", "scenario_id"):
            if sb.metadata.get(key):
                e[key] = sb.metadata[key]
        if e.get("ts") is None:
            e.pop("ts", None)
    return events


class GatewayIngest:
    """`on_call` of the gateway extension: each record line into the trace store, in order."""

    def __init__(self, app: Any):
        self.app = app

    def __call__(self, sb: SandboxRuntime, line: dict[str, Any]) -> None:
        state = sb.extension_state.get(STATE)
        task = asyncio.get_running_loop().create_task(self.write(sb, line))
        if isinstance(state, GatewayState):
            pending = sb.extension_state.setdefault("models_pending", set())
            pending.add(task)
            task.add_done_callback(pending.discard)

    async def write(self, sb: SandboxRuntime, line: dict[str, Any]) -> None:
        writer = self.app.get(TRACE_WRITER)
        if writer is None:
            return
        rows, errors = await asyncio.to_thread(self.prepare, sb, line)
        if errors:
            log.warning("sandbox %s: gateway call %s: %s", sb.id, line.get("seq"), errors[:2])
        await writer.write(sb.tenant_id, rows)

    @staticmethod
    def prepare(sb: SandboxRuntime, line: dict[str, Any]) -> tuple[list, list]:
        """Events of one line, redacted and shaped (in a worker thread: a line may be megabytes)."""
        redactor = Redactor(sb.secret_values())
        events = events_of(line, sb)
        if redactor:
            events = redactor.value(events)
        return prepare_events({"events": events}, SOURCE, sb.id)


async def settle(sb: SandboxRuntime) -> None:
    """Wait until every call recorded so far is in the trace store."""
    pending = list(sb.extension_state.get("models_pending") or ())
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


def keep_recording(settings: Any, tenant_id: str, state: GatewayState) -> str | None:
    """Store the run's recording (live runs with at least one call); its digest. Copied and hashed
    a piece at a time: the recording is never held in memory whole."""
    blobs = recordings(settings, tenant_id)
    try:
        source = open(state.record_path, "rb")
    except OSError:
        return None
    with source:
        blobs.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=blobs.root, prefix=".tmp-")
        try:
            digest = hashlib.sha256()
            calls = False
            with os.fdopen(fd, "wb") as out:
                for piece in iter(lambda: source.read(1024 * 1024), b""):
                    digest.update(piece)
                    out.write(piece)
                    calls = calls or bool(piece.strip())
            if not calls:
                Path(tmp).unlink(missing_ok=True)
                return None
            blobs.adopt(Path(tmp), digest.hexdigest())
            return digest.hexdigest()
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


async def register(app: Any) -> None:
    """on_startup: put the gateway extension on the sandbox manager."""
    if os.environ.get("SERVICE_MODEL_GATEWAY", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    manager = app.get(SANDBOXES)
    extensions = getattr(manager, "extensions", None)
    if not isinstance(extensions, list) or any(isinstance(e, ModelGatewayExtension) for e in extensions):
        return
    settings = app[SETTINGS]

    async def replay_of(sb: SandboxRuntime) -> str | None:
        run_id = sb.metadata.get("run_id")
        if not run_id:
            return None
        row = await run_store.get(app[STORE], run_id)
        if row is None or row.tenant_id != sb.tenant_id or row.models != "replayed":
            return None
        return row.model_recording

    def recording_path(tenant_id: str, digest: str) -> Path | None:
        blobs = recordings(settings, tenant_id)
        try:
            return blobs.path(digest) if blobs.exists(digest) else None
        except ValueError:
            return None

    extensions.append(ModelGatewayExtension(settings, on_call=GatewayIngest(app), replay_of=replay_of,
                                            recording_path=recording_path))


def counted_by_gateway(sb: SandboxRuntime | None) -> bool:
    return sb is not None and isinstance(sb.extension_state.get(STATE), GatewayState)


def demote_model_calls(rows: list[tuple[int, dict[str, Any]]]) -> None:
    """An agent that also traces its model calls itself (the SDK, OTLP) in a sandbox whose gateway
    records them: its `llm_call` events and the `tool_use` events of the tools its model asked for
    stay in the tree as spans without tokens or cost, so nothing is counted twice (the tools it
    runs, `tool_call`, are its own)."""
    for _, row in rows:
        if row.get("event_type") not in ("llm_call", "tool_use"):
            continue
        row["event_type"] = "span"
        for column in ("input_tokens", "output_tokens", "cached_tokens", "cost_usd", "cost"):
            row[column] = None
        try:
            metadata = json.loads(row["metadata"]) if row.get("metadata") else {}
        except ValueError:
            metadata = {}
        metadata["counted_by"] = SOURCE
        row["metadata"] = json.dumps(metadata, separators=(",", ":"))
