"""A snapshot agent's local source: `agent: {type: snapshot, snapshot: NAME, source: DIR}`.

`DIR` is relative to the spec file. Before a spec runs (`svc eval run`, `svc watch`, the TUI's watch
screen, MCP `svc_eval_run`) the CLI packs `DIR` the way `svc agents upload NAME DIR` does and uploads it
as a new version of `NAME` when its content digest differs from the latest version's: an unchanged
directory uploads nothing. The new version takes the spec's `entrypoint`, else the latest version's
entrypoint, runtime and auth; the first upload of a name needs the spec's `entrypoint`.

Works on the spec's plain YAML mapping (the TUI never imports the daemon's spec models)."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

from client.api import ApiError, Client
from client.routes import R

# Left out of a packed directory (client/commands/agents.py packs; watch mode ignores changes there).
SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "node_modules", ".mypy_cache", ".pytest_cache"})


class AgentSourceError(ValueError):
    """The source directory cannot be uploaded (missing, or no entrypoint to give the first version)."""


def source_dir(agent: Any, spec_path: Path) -> Path | None:
    """The directory a snapshot agent names as `source:`, resolved against the spec file's directory
    (None when the agent names none)."""
    if not isinstance(agent, Mapping) or agent.get("type") != "snapshot":
        return None
    source = agent.get("source")
    if not isinstance(source, str) or not source.strip():
        return None
    path = Path(source).expanduser()
    return (path if path.is_absolute() else Path(spec_path).resolve().parent / path).resolve()


def bundle_digest(bundle: bytes) -> str:
    """The digest the daemon gives a bundle (content-addressed: sha256 of the .tar.gz bytes)."""
    return "sha256:" + hashlib.sha256(bundle).hexdigest()


async def sync_agent_source(client: Client, spec_path: str | Path, agent: Any) -> dict[str, Any] | None:
    """Upload the agent's `source:` directory as a new version of its snapshot name when its content
    changed. Returns None when the agent names no source, else ``{"name", "snapshot", "uploaded"}``
    (`snapshot`: the version the run will resolve to)."""
    from client.commands.agents import pack_directory, upload_bundle

    directory = source_dir(agent, Path(spec_path))
    if directory is None:
        return None
    name = str(agent.get("snapshot") or "")
    if not name:
        raise AgentSourceError("agent.source: goes with agent.snapshot (the name to upload it as)")
    if not directory.is_dir():
        raise AgentSourceError(f"agent.source: {directory}: no such directory")
    bundle = pack_directory(directory)
    latest: dict[str, Any] | None = None
    try:
        latest = await client.call(R.AGENT_LATEST, name=name)
    except ApiError as exc:
        if exc.status != 404:
            raise
    if latest is not None and latest.get("digest") == bundle_digest(bundle):
        return {"name": name, "snapshot": latest, "uploaded": False}
    metadata: dict[str, Any] = {"name": name}
    entrypoint = agent.get("entrypoint")
    if isinstance(entrypoint, str):
        import shlex

        entrypoint = shlex.split(entrypoint)
    if entrypoint:
        metadata["entrypoint"] = list(entrypoint)
    elif latest is not None and latest.get("entrypoint"):
        metadata["entrypoint"] = latest["entrypoint"]
    else:
        raise AgentSourceError(f"agent.source: {name} has no snapshot yet to take an entrypoint from: name one in the spec"
                               " (agent.entrypoint: [python3, agent.py]) or upload a first version with svc agents upload")
    for key in ("runtime", "auth"):
        if latest is not None and latest.get(key):
            metadata[key] = latest[key]
    snapshot = await upload_bundle(client, metadata, bundle)
    return {"name": name, "snapshot": snapshot, "uploaded": True}


def describe(synced: Mapping[str, Any]) -> str:
    """One line for stderr: what the sync did."""
    snapshot = synced["snapshot"]
    if synced["uploaded"]:
        return f"uploaded agent {synced['name']} version {snapshot.get('version')} ({snapshot.get('id')}) from its source"
    return f"agent {synced['name']} version {snapshot.get('version')} is up to date with its source"
