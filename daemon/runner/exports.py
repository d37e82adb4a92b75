"""Teardown exports (``teardown.export``) into the artifact store.

The store is ``$SERVICE_ARTIFACTS_DIR`` (default ``$SERVICE_HOME/artifacts``), one directory per
tenant; ``to`` is relative to it, with ``{{ run_id }}`` and ``{{ scenario_id }}`` (the run id when
the run belongs to no scenario) filled in.

* ``audit_log``: the sandbox's audit log, from the daemon's own copy (the same lines as
  ``/workspace/.svc/audit.jsonl``, but never read from the workspace, where the agent can change it);
* ``db_dump``: ``pg_dump`` of a postgres service (plain SQL);
* ``snapshot``: the final workspace as a ``.tar.gz`` (without the daemon's ``.svc`` area), through
  the sandbox handle (``Sandbox.archive``: walked from directory fd to directory fd without
  following links; links are stored as links, FIFOs/devices/sockets are left out).

A failed export is recorded with its ``error``; it never changes the verdict.
"""
from __future__ import annotations

import asyncio
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.errors import NotFound

if TYPE_CHECKING:
    from daemon.sandbox.handle import Sandbox
    from daemon.spec.blocks import Export
    from daemon.spec.models import SpecDocument

TEMPLATE = re.compile(r"\{\{\s*(run_id|scenario_id)\s*\}\}")


def render_to(to: str, run_id: str, scenario_id: str | None) -> str:
    values = {"run_id": run_id, "scenario_id": scenario_id or run_id}
    return TEMPLATE.sub(lambda m: values[m.group(1)], to)


def _target(root: Path, rel: str) -> Path:
    target = (root / rel).resolve()
    if not str(target).startswith(str(root.resolve()) + "/"):
        raise ValueError(f"export path '{rel}' leaves the artifact store")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _describe(target: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with target.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return {"path": str(target), "size_bytes": target.stat().st_size, "sha256": digest.hexdigest()}


def _write(target: Path, data: bytes) -> dict[str, Any]:
    target.write_bytes(data)
    return _describe(target)


async def run_export(sandbox: Sandbox, export: Export, root: Path, *, spec: SpecDocument, run_id: str,
                     scenario_id: str | None) -> dict[str, Any]:
    """One `teardown.export` of the run to `root`; the export's error, if any, is on the entry."""
    rel = render_to(export.to, run_id, scenario_id)
    entry: dict[str, Any] = {"type": export.type, "to": rel}
    try:
        target = await asyncio.to_thread(_target, root, rel)
        if export.type == "audit_log":
            try:
                audit = sandbox.audit()
            except NotFound:
                raise RuntimeError(f"the audit log of sandbox {sandbox.id} is gone") from None
            data = await asyncio.to_thread(audit.raw)
            entry.update(await asyncio.to_thread(_write, target, data))
        elif export.type == "snapshot":
            await sandbox.archive(target)
            entry.update(await asyncio.to_thread(_describe, target))
        elif export.type == "db_dump":
            from daemon.scoring.checks.sql import credentials

            user, db = credentials(sandbox, spec, export.service)
            result = await sandbox.service_exec(
                export.service, ["pg_dump", "-U", user, "-d", db, "--no-owner", "--no-privileges"], timeout_s=120,
            )
            if result.exit_code != 0:
                raise RuntimeError(f"pg_dump exited {result.exit_code}: {(result.stderr or '').strip()[:300]}")
            entry["service"] = export.service
            entry.update(await asyncio.to_thread(_write, target, result.stdout.encode()))
            if "[svc] output truncated" in result.stdout:
                entry["truncated"] = True
    except Exception as exc:  # noqa: BLE001 - recorded on the artifact
        entry["error"] = f"{type(exc).__name__}: {exc}"
    return entry
