-- Agent snapshots (issue 5): content-addressed bundles, one row per uploaded version, per-name tags.
-- The bundle bytes live once in blobs/sha256/<digest>; several versions (and names) may share a digest.
CREATE TABLE agent_snapshots (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    tag TEXT,
    digest TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    runtime TEXT,
    entrypoint TEXT NOT NULL,
    auth TEXT,
    files TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (tenant_id, name, version)
);
CREATE INDEX agent_snapshots_digest ON agent_snapshots(digest);
CREATE INDEX agent_snapshots_name ON agent_snapshots(tenant_id, name, version);

CREATE TABLE agent_tags (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    tag TEXT NOT NULL,
    snapshot_id TEXT NOT NULL REFERENCES agent_snapshots(id) ON DELETE CASCADE,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name, tag)
);
CREATE INDEX agent_tags_snapshot ON agent_tags(snapshot_id);
