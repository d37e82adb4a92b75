"""Teardown exports (``teardown.export``) into the artifact store.

The store is ``$SERVICE_ARTIFACTS_DIR`` (default ``$SERVICE_HOME/artifacts``), one directory per
tenant; ``to`` is relative to it, with ``{{ run_id }}`` and ``{{ scenario_id }}`` (the run id when
the run belongs to no scenario) filled in.

* ``audit_log``: the sandbox's ``/workspace/.svc/audit.jsonl``;
* ``db_dump``: ``pg_dump`` of a postgres service (plain SQL);
* ``snapshot``: the final workspace as a ``.tar.gz`` (without the daemon's ``.svc`` area).

A failed export is recorded with its ``error``; it never changes the verdict.
"""
from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

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


def _copy(source: Path, target: Path) -> dict[str, Any]:
    if source.exists():
        shutil.copyfile(source, target)
    else:
        target.write_bytes(b"")
    return _describe(target)


def _write(target: Path, data: bytes) -> dict[str, Any]:
    target.write_bytes(data)
    return _describe(target)


def _tar_workspace(workspace: Path, target: Path) -> dict[str, Any]:
    def skip_daemon_area(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        name = info.name
        return None if name == "workspace/.svc" or name.startswith("workspace/.svc/") else info

    with tarfile.open(target, "w:gz", compresslevel=6) as tar:
        tar.add(str(workspace), arcname="workspace", filter=skip_daemon_area)
    return _describe(target)


async def run_export(scenario: Any, export: Any, root: Path) -> dict[str, Any]:
    rel = render_to(export.to, scenario.run_id, scenario.scenario_id)
    entry: dict[str, Any] = {"type": export.type, "to": rel}
    try:
        target = await asyncio.to_thread(_target, root, rel)
        if export.type == "audit_log":
            entry.update(await asyncio.to_thread(_copy, scenario.workspace / ".svc" / "audit.jsonl", target))
        elif export.type == "snapshot":
            entry.update(await asyncio.to_thread(_tar_workspace, scenario.workspace, target))
        elif export.type == "db_dump":
            from daemon.scoring.checks.sql import credentials

            user, db = credentials(scenario.manager, scenario.sandbox_id, scenario.spec, export.service)
            result = await scenario.sandboxes.service_exec(
                scenario.sandbox_id, export.service, ["pg_dump", "-U", user, "-d", db, "--no-owner", "--no-privileges"], timeout_s=120,
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
