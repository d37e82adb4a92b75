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
        marks = ",".join("?" * len(snapshot_ids))
        rows = await self.store.fetchall(f"SELECT snapshot_id, tag FROM agent_tags WHERE snapshot_id IN ({marks})", snapshot_ids)
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
            count_row = await tx.fetchone(
                "SELECT count(*) AS n, max(version) AS v FROM agent_snapshots WHERE tenant_id = ? AND name = ?",
                (tenant_id, meta.name),
            )
            if count_row["n"] >= limit:
                return None, f"agent '{meta.name}' already has {count_row['n']} versions (limit {limit}); delete old ones with DELETE /v1/snapshots/{{id}}"
            version = (count_row["v"] or 0) + 1
            sid = snapshot_id(tenant_id, meta.name, version, hexdigest)
            await tx.execute(
                "INSERT INTO agent_snapshots (id, tenant_id, name, version, tag, digest, size_bytes, runtime, entrypoint, auth, files, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid, tenant_id, meta.name, version, meta.tag, hexdigest, size, meta.runtime,
                    dumps(meta.entrypoint), dumps(meta.auth.model_dump()) if meta.auth else None, dumps(files), now,
                ),
            )
            for tag in {"latest", *( [meta.tag] if meta.tag else [])}:
                await tx.execute(
                    "INSERT INTO agent_tags (tenant_id, name, tag, snapshot_id, updated_at) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (tenant_id, name, tag) DO UPDATE SET snapshot_id = excluded.snapshot_id, updated_at = excluded.updated_at",
                    (tenant_id, meta.name, tag, sid, now),
                )
        return await self.by_id(sid), None

    async def by_id(self, sid: str) -> Any:
        return await self.store.fetchone("SELECT * FROM agent_snapshots WHERE id = ?", (sid,))

    async def latest(self, tenant_id: str, name: str) -> Any:
        return await self.by_tag(tenant_id, name, "latest")

    async def by_tag(self, tenant_id: str, name: str, tag: str) -> Any:
        return await self.store.fetchone(
            "SELECT s.* FROM agent_tags t JOIN agent_snapshots s ON s.id = t.snapshot_id"
            " WHERE t.tenant_id = ? AND t.name = ? AND t.tag = ?",
            (tenant_id, name, tag),
        )

    async def by_version(self, tenant_id: str, name: str, version: int) -> Any:
        return await self.store.fetchone(
            "SELECT * FROM agent_snapshots WHERE tenant_id = ? AND name = ? AND version = ?", (tenant_id, name, version)
        )

    async def name_exists(self, tenant_id: str, name: str) -> bool:
        row = await self.store.fetchone("SELECT 1 FROM agent_snapshots WHERE tenant_id = ? AND name = ? LIMIT 1", (tenant_id, name))
        return row is not None

    async def delete(self, row: Any) -> bool:
        """Remove one version row; frees the blob when nothing else references it. When the row
        held ``latest``, the tag moves to the newest remaining version."""
        async with self.store.transaction() as tx:
            await tx.execute("DELETE FROM agent_tags WHERE snapshot_id = ?", (row["id"],))
            await tx.execute("DELETE FROM agent_snapshots WHERE id = ?", (row["id"],))
            newest = await tx.fetchone(
                "SELECT id FROM agent_snapshots WHERE tenant_id = ? AND name = ? ORDER BY version DESC LIMIT 1",
                (row["tenant_id"], row["name"]),
            )
            if newest is not None:
                await tx.execute(
                    "INSERT OR IGNORE INTO agent_tags (tenant_id, name, tag, snapshot_id, updated_at) VALUES (?, ?, 'latest', ?, ?)",
                    (row["tenant_id"], row["name"], newest["id"], now_iso()),
                )
            still = await tx.fetchone(
                "SELECT 1 FROM agent_snapshots WHERE digest = ? UNION ALL SELECT 1 FROM spec_files WHERE digest = ? LIMIT 1",
                (row["digest"], row["digest"]),
            )  # the blob store is shared: a spec's uploaded fixture file may have the same bytes
        if still is None:
            import asyncio

            return await asyncio.to_thread(self.blobs.delete, row["digest"])
        return False

    def bundle_path(self, row: Any) -> Path:
        return self.blobs.path(row["digest"])


def get_store(app: Any) -> SnapshotStore:
    return SnapshotStore(app[STORE], app[SETTINGS].blobs_dir)
