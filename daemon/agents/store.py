"""Agent snapshots: versioned, content-addressed bundles of agent code.

* The bundle (a ``.tar.gz`` rooted at the agent's working directory) is stored once per digest in
  the blob store; each upload adds a version row for its name, even when the bytes are identical.
* A snapshot id is ``snap_`` + 24 hex of sha256(tenant, name, version, digest): derived from the
  content hash, immutable, and unique per version row, so ``snapshot_id`` pins exactly one version
  (its entrypoint and auth included) and deleting it removes exactly that row.
* The tag ``latest`` moves to every new upload; an upload's ``tag`` moves that tag to it.
"""
from __future__ import annotations

import os
import posixpath
import re
import tarfile
from pathlib import Path
from typing import Any

from daemon.store import agents as agent_rows
from daemon.store.db import Store, dumps, loads
from daemon.util import now_iso, sha256_hex

# The snapshot models are part of the API contract (daemon/contract/agents.py).
from daemon.contract.agents import (  # noqa: E402,F401
    ENV_RE,
    NAME_RE,
    ConfigFile,
    Snapshot,
    SnapshotAuth,
    SnapshotMetadata,
    check_name,
)
from daemon.appkeys import SETTINGS, STORE

DEFAULT_MAX_VERSIONS = 100
MAX_FILES_KEPT = 5000


def max_versions() -> int:
    raw = os.environ.get("SERVICE_MAX_AGENT_VERSIONS", "")
    return int(raw) if raw.strip().isdigit() and int(raw) > 0 else DEFAULT_MAX_VERSIONS


class BundleError(ValueError):
    def __init__(self, message: str, member: str | None = None):
        super().__init__(message)
        self.member = member


def inspect_bundle(path: Path, max_unpacked: int) -> list[str]:
    """Validate a ``.tar.gz`` bundle and return its regular files (normalised relative paths).

    Rejects absolute member names, ``..`` components, links whose target leaves the bundle root,
    device and FIFO members, and archives that unpack to more than ``max_unpacked`` bytes."""
    files: list[str] = []
    total = 0
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar:
                name = member.name
                if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
                    raise BundleError(f"bundle member '{name}' has an absolute path", name)
                parts = [p for p in name.split("/") if p not in ("", ".")]
                if ".." in parts:
                    raise BundleError(f"bundle member '{name}' contains '..'", name)
                clean = "/".join(parts)
                if member.issym():
                    target = member.linkname
                    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(clean), target))
                    if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
                        raise BundleError(f"bundle member '{name}' is a symlink escaping the bundle root (-> {target})", name)
                elif member.islnk():
                    target = posixpath.normpath(member.linkname)
                    if member.linkname.startswith("/") or target == ".." or target.startswith("../"):
                        raise BundleError(f"bundle member '{name}' is a hard link escaping the bundle root (-> {member.linkname})", name)
                elif member.isdev():
                    raise BundleError(f"bundle member '{name}' is a device or FIFO; only files, directories and links are allowed", name)
                elif member.isfile():
                    total += member.size
                    if total > max_unpacked:
                        raise BundleError(f"bundle unpacks to more than {max_unpacked} bytes")
                    if clean and len(files) < MAX_FILES_KEPT:
                        files.append(clean)
    except BundleError:
        raise
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BundleError(f"bundle is not a valid .tar.gz archive: {exc}") from None
    return files


def snapshot_id(tenant_id: str, name: str, version: int, digest: str) -> str:
    return "snap_" + sha256_hex(f"{tenant_id}\0{name}\0{version}\0{digest}")[:24]


class SnapshotStore:
    def __init__(self, store: Store, blobs_root: Path):
        from daemon.agents.blobs import Blobs

        self.store = store
        self.blobs = Blobs(blobs_root)

    def to_body(self, row: Any, tags: list[str]) -> Snapshot:
        auth = loads(row["auth"])
        return Snapshot(
            id=row["id"],
            name=row["name"],
            version=row["version"],
            tag=row["tag"],
            tags=sorted(tags),
            digest="sha256:" + row["digest"],
            size_bytes=row["size_bytes"],
            storage_path=str(self.blobs.root / row["digest"]),
            runtime=row["runtime"],
            entrypoint=loads(row["entrypoint"]),
            auth=SnapshotAuth(**auth) if auth else None,
            created_at=row["created_at"],
        )

    async def tags_of(self, snapshot_ids: list[str]) -> dict[str, list[str]]:
        if not snapshot_ids:
            return {}
        rows = await agent_rows.tags_of(self.store, snapshot_ids)
        out: dict[str, list[str]] = {}
        for r in rows:
            out.setdefault(r["snapshot_id"], []).append(r["tag"])
        return out

    async def bodies(self, rows: list[Any]) -> list[Snapshot]:
        tags = await self.tags_of([r["id"] for r in rows])
        return [self.to_body(r, tags.get(r["id"], [])) for r in rows]

    async def body(self, row: Any) -> Snapshot:
        return (await self.bodies([row]))[0]

    async def save(
        self, tenant_id: str, meta: SnapshotMetadata, hexdigest: str, size: int, files: list[str]
    ) -> tuple[Any, str | None]:
        """Add a version row; returns (row, None) or (None, error) when the version limit is hit."""
        now = now_iso()
        limit = max_versions()
        async with self.store.transaction() as tx:
            count_row = await agent_rows.version_count(tx, tenant_id, meta.name)
            if count_row["n"] >= limit:
                return None, f"agent '{meta.name}' already has {count_row['n']} versions (limit {limit}); delete old ones with DELETE /v1/snapshots/{{id}}"
            version = (count_row["v"] or 0) + 1
            sid = snapshot_id(tenant_id, meta.name, version, hexdigest)
            await agent_rows.insert_snapshot(
                tx, snapshot_id=sid, tenant_id=tenant_id, name=meta.name, version=version, tag=meta.tag, digest=hexdigest,
                size_bytes=size, runtime=meta.runtime, entrypoint=dumps(meta.entrypoint),
                auth=dumps(meta.auth.model_dump()) if meta.auth else None, files=dumps(files), created_at=now,
            )
            for tag in {"latest", *( [meta.tag] if meta.tag else [])}:
                await agent_rows.move_tag(tx, tenant_id, meta.name, tag, sid, now)
        return await self.by_id(sid), None

    async def by_id(self, sid: str) -> Any:
        return await agent_rows.by_id(self.store, sid)

    async def latest(self, tenant_id: str, name: str) -> Any:
        return await self.by_tag(tenant_id, name, "latest")

    async def by_tag(self, tenant_id: str, name: str, tag: str) -> Any:
        return await agent_rows.by_tag(self.store, tenant_id, name, tag)

    async def by_version(self, tenant_id: str, name: str, version: int) -> Any:
        return await agent_rows.by_version(self.store, tenant_id, name, version)

    async def name_exists(self, tenant_id: str, name: str) -> bool:
        return await agent_rows.name_exists(self.store, tenant_id, name)

    async def delete(self, row: Any) -> bool:
        """Remove one version row; frees the blob when nothing else references it. When the row
        held ``latest``, the tag moves to the newest remaining version."""
        async with self.store.transaction() as tx:
            await agent_rows.delete_snapshot(tx, row["id"])
            newest = await agent_rows.newest_version(tx, row["tenant_id"], row["name"])
            if newest is not None:
                await agent_rows.tag_latest_if_untagged(tx, row["tenant_id"], row["name"], newest["id"], now_iso())
            # the blob store is shared: a spec's uploaded fixture file may have the same bytes
            still = await agent_rows.digest_in_use(tx, row["digest"])
        if not still:
            import asyncio

            return await asyncio.to_thread(self.blobs.delete, row["digest"])
        return False

    def bundle_path(self, row: Any) -> Path:
        return self.blobs.path(row["digest"])


def get_store(app: Any) -> SnapshotStore:
    return SnapshotStore(app[STORE], app[SETTINGS].blobs_dir)
