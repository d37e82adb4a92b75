"""ATIF trajectories: a run's, written (`GET /v1/runs/{run_id}/atif`), and one recorded elsewhere, read
into a trace (`POST /v1/trajectories`). The mapping: daemon/traces/atif.py and docs/how-to/atif.md."""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from daemon.api.runs import owned_run
from daemon.appkeys import SETTINGS, STORE, TRACE_DB, TRACE_WRITER
from daemon.contract import routes as R
from daemon.effects.load import NoTrajectory, run_effects
from daemon.contract.atif import AtifTrajectory, TrajectoryImported, TrajectoryImportQuery
from daemon.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge, UnsupportedMediaType
from daemon.http import Reply, Routes, decode_json, read_bytes
from daemon.runner import records
from daemon.store.runs import RunRow
from daemon.store import experiments as experiment_store
from daemon.traces import atif, gateway, query
from daemon.traces.ingest import BodyError, prepare_events

routes = Routes("traces")
log = logging.getLogger("svcd.traces")

MAX_IMPORT_BYTES = 16 * 1024 * 1024
MAX_LISTED_ERRORS = 50


def _read_blob(blobs_dir: Any, digest: str) -> dict[str, Any]:
    from daemon.agents.blobs import Blobs

    try:
        value = json.loads(Blobs(blobs_dir).path(digest).read_bytes())
    except (FileNotFoundError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


async def _effects(request: web.Request, row: RunRow) -> Any:
    """The run's effect ledger (daemon/effects), or None when it cannot be built."""
    try:
        ledger = await run_effects(request.app[STORE], request.app[SETTINGS].blobs_dir, row)
    except NoTrajectory:
        return None
    except Exception:  # noqa: BLE001 - the export stands without its ledger
        log.exception("run %s: the effect ledger could not be built for its ATIF export", row.id)
        return None
    return ledger.model_dump(mode="json") if hasattr(ledger, "model_dump") else ledger


@routes.get(R.GET_RUN_ATIF, "The run as an ATIF trajectory (ATIF-v1.8): the agent's steps from the model gateway's recording "
            "and the run's trace, svc's verdict, invariant results, cost and effects under extra.svc; 409 until the run has "
            "finished", typed=True, errors=(409,))
async def get_run_atif(request: web.Request) -> dict[str, Any]:
    row = await owned_run(request)
    if row.status not in records.TERMINAL:
        raise Conflict(f"run '{row.id}' is {row.status}; its trajectory is written once it has finished", row.status)
    settings = request.app[SETTINGS]
    run = records.body(row)
    blob = await asyncio.to_thread(_read_blob, settings.blobs_dir, row.trajectory_digest) if row.trajectory_digest else {}
    calls: list[dict[str, Any]] = []
    if row.models == "live" and row.model_recording:
        blobs = gateway.recordings(settings, row.tenant_id)
        try:
            path = blobs.path(row.model_recording) if blobs.exists(row.model_recording) else None
        except ValueError:
            path = None
        if path is not None:
            calls = await asyncio.to_thread(atif.read_recording, path)
    spans = []
    async for span in query.iter_events(request.app[TRACE_DB], request["tenant_id"], " AND run_id = ?", [row.id],
                                        order="asc", head_only=True):
        spans.append(span)
        if len(spans) >= atif.MAX_SPANS:
            break
    effects = await _effects(request, row)
    task = blob.get("task") if isinstance(blob.get("task"), dict) else None
    described = blob.get("agent") if isinstance(blob.get("agent"), dict) else None
    return await asyncio.to_thread(atif.build, run, task, described, calls, spans, effects)


async def _stamps(request: web.Request, q: TrajectoryImportQuery) -> dict[str, Any]:
    """run_id, experiment_id and scenario_id the imported events are filed under."""
    stamps: dict[str, Any] = {"run_id": None, "experiment_id": q.experiment_id, "scenario_id": q.scenario_id}
    if q.run_id:
        row = await records.get(request.app[STORE], q.run_id)
        if row is None or row.tenant_id != request["tenant_id"]:
            raise NotFound("run", q.run_id)
        for key in ("experiment_id", "scenario_id"):
            given = getattr(q, key)
            if given is not None and getattr(row, key) is not None and given != getattr(row, key):
                raise InvalidRequest(f"query.{key}: run '{q.run_id}' belongs to {key} '{getattr(row, key)}', not '{given}'",
                                     [{"loc": f"query.{key}", "msg": "does not match the run's"}])
            stamps[key] = getattr(row, key) or given
        stamps["run_id"] = row.id
    if stamps["experiment_id"]:
        known = await experiment_store.known_ids(request.app[STORE], request["tenant_id"], [stamps["experiment_id"]])
        if stamps["experiment_id"] not in known:
            raise NotFound("experiment", stamps["experiment_id"])
    return stamps


# Parts of a pydantic error location that name a member of a union, not a field of the document.
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "AtifImageSource", "AtifAudioSource", "AtifContentPart"})


def field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Each problem with the path of the document's field (`steps.1.message`), once."""
    out: dict[str, str] = {}
    for err in exc.errors(include_url=False, include_input=False):
        parts = [str(p) for p in err["loc"] if not (isinstance(p, str) and (p in _UNION_TAGS or "[" in p))]
        out.setdefault(".".join(parts), err["msg"])
    return [{"loc": loc, "msg": msg} for loc, msg in out.items()]


def _validate(raw: bytes) -> AtifTrajectory:
    data = decode_json(raw)
    if not isinstance(data, dict):
        raise InvalidRequest("body: an ATIF trajectory is a JSON object", [{"loc": "body", "msg": "not a JSON object"}])
    try:
        return AtifTrajectory.model_validate(data)
    except ValidationError as exc:
        errors = field_errors(exc)
        first = errors[0]
        raise InvalidRequest(f"{first['loc'] or 'body'}: {first['msg']}", errors[:MAX_LISTED_ERRORS]) from None


@routes.post(R.IMPORT_TRAJECTORY, "Read an ATIF trajectory (ATIF-v1.0 to v1.8) into a new trace, filed under a run or an "
             "experiment (and scenario) so judges and score rules score it; a malformed document is a 400 naming the field",
             typed=True, raw_body=True, errors=(404, 413))
async def import_trajectory(request: web.Request) -> Reply:
    if request.content_type != "application/json":
        raise UnsupportedMediaType(f"expected content type application/json, got {request.content_type or 'none'}")
    if request.content_length is not None and request.content_length > MAX_IMPORT_BYTES:
        raise PayloadTooLarge(MAX_IMPORT_BYTES)
    q: TrajectoryImportQuery = request["query"]
    stamps = await _stamps(request, q)
    raw = await read_bytes(request)
    if len(raw) > MAX_IMPORT_BYTES:
        raise PayloadTooLarge(MAX_IMPORT_BYTES)
    doc = await asyncio.to_thread(_validate, raw)

    def shape() -> tuple[str, int, list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
        trace_id, steps, events = atif.import_events(doc, stamps)
        rows, errors = prepare_events({"events": events}, atif.SOURCE, None)
        return trace_id, steps, rows, errors

    try:
        trace_id, steps, rows, errors = await asyncio.to_thread(shape)
    except BodyError as exc:
        raise InvalidRequest(str(exc), [{"loc": exc.loc, "msg": str(exc)}]) from None
    if errors:  # the mapping made an event the ingest refuses: a bug, reported rather than half-stored
        log.error("ATIF import: %d events refused: %s", len(errors), errors[:3])
        raise InvalidRequest(f"the trajectory could not be read into trace events: {errors[0]['loc']}: {errors[0]['msg']}",
                             errors[:MAX_LISTED_ERRORS])
    stored, more = await request.app[TRACE_WRITER].write(request["tenant_id"], rows)
    if more:
        log.warning("ATIF import: %d events not stored: %s", len(more), more[:3])
    body = TrajectoryImported(trace_id=trace_id, steps=steps, events=len(stored), run_id=stamps["run_id"],
                              experiment_id=stamps["experiment_id"], scenario_id=stamps["scenario_id"], agent=doc.agent.name)
    return Reply(body, status=201)
