"""In-agent traces from a sandbox on a swarm node (issue 39). No daemon socket reaches another node,
so the SDK there writes each batch it would have POSTed as one line of a file in a drop directory
(`SERVICE_BASE_URL=file:///run/svc/traces`, client/tracing/sdk.py); the directory is a bind of the
sandbox's runtime directory, brought back to this host (engine/swarm/mirror.py: files that grew) after
each command and, while the sandbox is bound to a run or a caller, once a second (`follow`): what is new there is ingested as the sandbox's own events (sandbox_events.py:
the daemon's ids stamped, the run's secret values redacted, the gateway's model calls demoted),
exactly as if the agent had posted them with its sandbox token, so its spans show while it runs.
The runner ingests once more after the agent, before the run's events are read.

What comes back is untrusted: only regular files named spans-*.jsonl are read, none through a link,
at most MAX_BYTES together per sandbox, each line a JSON object or skipped; a line that fails the
events' checks is dropped as a POSTed one would be refused.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
from pathlib import Path
from typing import Any

from aiohttp import web

from daemon.appkeys import TRACE_WRITER
from daemon.sandbox.runtime import SandboxRuntime
from daemon.traces.ingest import BodyError, prepare_events
from daemon.traces.sandbox_events import redact_rows, sandbox_redactor, stamp_sandbox_rows

log = logging.getLogger("svcd.traces")

DIR_IN_SANDBOX = "/run/svc/traces"
MAX_BYTES = 64 * 1024 * 1024
FILE_NAME = re.compile(r"spans-[0-9]{1,10}\.jsonl")
STATE = "trace_drop"  # sb.extension_state: {file name: bytes already ingested}
LOCK = "trace_drop_lock"  # sb.extension_state: one ingest at a time (the follower's and the runner's)
FOLLOW_S = 1.0
# Brought back live only while the drop is at most this big as an archive (a run's spans are
# kilobytes); past it, what the agent drops comes back at each command's end, as before.
LIVE_CAP = 8 * 1024 * 1024


def drop_dir(sb: SandboxRuntime) -> Path:
    return sb.runtime_dir / "traces"


def _new_lines(directory: Path, done: dict[str, int]) -> list[Any]:
    """The JSON objects of the lines added since `done` (advanced in place)."""
    bodies: list[Any] = []
    total = sum(done.values())
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return bodies
    for name in names:
        if not FILE_NAME.fullmatch(name) or total >= MAX_BYTES:
            continue
        try:
            fd = os.open(directory / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                continue
            fh.seek(done.get(name, 0))
            data = fh.read(MAX_BYTES - total)
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits for the next read
        done[name] = done.get(name, 0) + len(complete)
        total += len(complete)
        for line in complete.splitlines():
            try:
                body = json.loads(line)
            except ValueError:
                continue
            if isinstance(body, dict):
                bodies.append(body)
    return bodies


async def ingest(app: web.Application, sb: SandboxRuntime) -> int:
    """Store what the agent dropped since the last call; how many events were stored."""
    directory = drop_dir(sb)
    writer = app.get(TRACE_WRITER)
    if writer is None or not directory.is_dir():
        return 0
    async with sb.extension_state.setdefault(LOCK, asyncio.Lock()):
        return await _ingest(app, writer, sb, directory)


async def _ingest(app: web.Application, writer: Any, sb: SandboxRuntime, directory: Path) -> int:
    done: dict[str, int] = sb.extension_state.setdefault(STATE, {})
    bodies = await asyncio.to_thread(_new_lines, directory, done)
    redactor = sandbox_redactor(app, sb.id)
    stored = 0
    for body in bodies:
        def prepare(body: Any = body) -> list[tuple[int, dict[str, Any]]]:
            if redactor is not None:
                body = redactor.value(body)
            rows, _ = prepare_events(body, "sandbox", sb.id)
            redact_rows(rows, redactor)
            return rows

        try:
            rows = await asyncio.to_thread(prepare)
        except BodyError as exc:
            log.info("sandbox %s: a dropped trace batch was refused: %s", sb.id, exc)
            continue
        await stamp_sandbox_rows(app, sb.tenant_id, sb.id, rows)
        written, _ = await writer.write(sb.tenant_id, rows)
        stored += len(written)
    return stored


async def follow(app: web.Application, driver: Any, sb: SandboxRuntime) -> None:
    """Until cancelled: bring the agent container's drop back and ingest what is new, once a second.
    A drop grown over LIVE_CAP stops the following (it still comes back after each command)."""
    while True:
        await asyncio.sleep(FOLLOW_S)
        if sb.agent is None:
            continue
        try:
            await driver.collect(sb.agent.id, cap=LIVE_CAP)
        except ValueError as exc:
            log.info("sandbox %s: its trace drop is no longer followed live: %s", sb.id, exc)
            return
        except Exception as exc:  # noqa: BLE001 - the node is busy or the container ending: next round
            log.debug("bringing back the trace drop of %s failed: %s", sb.id, exc)
            continue
        try:
            await ingest(app, sb)
        except Exception:  # noqa: BLE001 - traces never fail a sandbox
            log.exception("ingesting the dropped traces of %s failed", sb.id)
