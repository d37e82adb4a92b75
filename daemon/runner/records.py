"""Run rows: create, update, read, and the Run body the API serves (with its signed trajectory URL).

Statuses (DECISIONS "Runs"): queued -> running -> passed | failed | errored. The scored outcome
(invariant and forbidden results, violations, reproducer, timings, artifacts, error) lives in the
row's ``result`` JSON; the full trajectory is a blob named by ``trajectory_digest``.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import shlex
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from daemon.store.runs import RunRow
from daemon.store.runs import get as get, insert as insert, update as update  # the run row's SQL lives in the store
from daemon.util import new_id

TERMINAL = ("passed", "failed", "errored")
VERDICT_OF = {"passed": "pass", "failed": "fail", "errored": "error"}
DEFAULT_TRAJECTORY_TTL_S = 24 * 3600


def new_run_id() -> str:
    return new_id("run_")


def new_seed() -> str:
    return "seed_" + secrets.token_hex(8)


def reproducer(spec_id: str, spec_version: int, seed: str, inputs: dict[str, Any] | None,
               matrix_entry: dict[str, Any] | None, dataset: dict[str, Any] | None = None,
               pins: dict[str, Any] | None = None) -> dict[str, Any]:
    """A command line that, pasted into a shell, replays exactly this scenario from its seed. A dataset
    scenario's `matrix_entry.record_id` makes the replay read that record again (its input and
    expected); `dataset` ({id, version, record_id}) says which one. `pins` (the agent snapshot the run
    resolved, its model recording) make the replay use those, not the latest snapshot or a live model."""
    import json

    parts = ["svc", "runs", "create", "--spec", spec_id, "--spec-version", str(spec_version), "--seed", seed]
    if inputs:
        parts += ["--inputs", json.dumps(inputs, separators=(",", ":"), sort_keys=True)]
    if matrix_entry:
        parts += ["--matrix", json.dumps(matrix_entry, separators=(",", ":"), sort_keys=True)]
    pins = {k: v for k, v in (pins or {}).items() if v}
    if pins.get("agent_snapshot_id"):
        parts += ["--pin-agent", pins["agent_snapshot_id"]]
    if pins.get("model_recording"):
        parts += ["--replay-models", pins["model_recording"]]
    parts.append("--wait")
    return {
        "command": " ".join(shlex.quote(p) for p in parts),
        "seed": seed,
        "spec_id": spec_id,
        "spec_version": spec_version,
        "inputs": inputs or None,
        "matrix_entry": matrix_entry or None,
        "dataset": dataset,
        "pins": pins or None,
    }


# --- trajectory URLs -----------------------------------------------------------------------------


def signing_key(home: Path) -> bytes:
    """The per-daemon URL signing key, created (0600) on first use under $SERVICE_HOME."""
    path = home / "url-signing.key"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        pass
    home.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.hex())
    return key


def trajectory_signature(key: bytes, run_id: str, expires: int) -> str:
    return hmac.new(key, f"trajectory:{run_id}:{expires}".encode(), hashlib.sha256).hexdigest()


def trajectory_ttl_s() -> int:
    raw = os.environ.get("SERVICE_TRAJECTORY_URL_TTL_S", "")
    return int(raw) if raw.strip().isdigit() and int(raw) > 0 else DEFAULT_TRAJECTORY_TTL_S


def trajectory_path(key: bytes, run_id: str, expires: int | None = None) -> str:
    expires = expires if expires is not None else int(time.time()) + trajectory_ttl_s()
    query = urlencode({"expires": expires, "sig": trajectory_signature(key, run_id, expires)})
    return f"/v1/runs/{run_id}/trajectory?{query}"


def check_trajectory_signature(key: bytes, run_id: str, expires: str | None, sig: str | None) -> str | None:
    """None when valid, else the reason it is not."""
    if not expires or not sig:
        return "the trajectory URL needs its expires and sig parameters"
    if not expires.isdigit():
        return "invalid expires parameter"
    if not hmac.compare_digest(trajectory_signature(key, run_id, int(expires)), sig):
        return "invalid signature"
    if int(expires) < time.time():
        return "the trajectory URL has expired; GET the run again for a fresh one"
    return None


# --- the Run body --------------------------------------------------------------------------------


def models_body(row: RunRow) -> dict[str, Any] | None:
    if not row.models:
        return None
    return {"mode": row.models, "recording": row.model_recording, **(row.model_spend or {})}


def body(row: RunRow, *, key: bytes | None = None, base_url: str | None = None) -> dict[str, Any]:
    result = row.result
    out: dict[str, Any] = {
        "id": row.id,
        "sandbox_id": row.sandbox_id,
        "spec_id": row.spec_id,
        "spec_version": row.spec_version,
        "status": row.status,
        "verdict": row.verdict,
        "reason": row.reason,
        "score": row.score,
        "invariant_results": result.get("invariant_results", []),
        "forbidden_results": result.get("forbidden_results", []),
        "violations": result.get("violations", []),
        "trajectory_url": None,
        "seed": row.seed,
        "inputs": row.inputs,
        "matrix_entry": row.matrix_entry,
        "experiment_id": row.experiment_id,
        "scenario_id": row.scenario_id,
        "replay_of": row.replay_of,
        "agent": result.get("agent"),
        "error": result.get("error"),
        "reproducer": result.get("reproducer")
        or reproducer(row.spec_id, row.spec_version, row.seed, row.inputs, row.matrix_entry),
        "timings": result.get("timings"),
        "artifacts": result.get("artifacts", []),
        "cost": result.get("cost"),
        "models": models_body(row),
        "duration_ms": row.duration_ms,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "finished_at": row.finished_at,
    }
    if row.trajectory_digest and key is not None:
        path = trajectory_path(key, row.id)
        out["trajectory_url"] = (base_url.rstrip("/") + path) if base_url else path
    return out
