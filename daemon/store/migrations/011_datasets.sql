-- Datasets (issue 15): versioned records. Records are append-only: each row carries the version that
-- added it and, once a keyed upsert replaced it, the version that removed it, so version N is the one
-- range query added_version <= N AND (removed_version IS NULL OR removed_version > N).
CREATE TABLE datasets (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    description TEXT,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX datasets_tenant ON datasets(tenant_id, seq);

CREATE TABLE dataset_versions (
    dataset_id TEXT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    record_count INTEGER NOT NULL,
    added INTEGER NOT NULL,
    replaced INTEGER NOT NULL,
    digest TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (dataset_id, version)
);

CREATE TABLE dataset_records (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    dataset_id TEXT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    key TEXT,
    added_version INTEGER NOT NULL,
    removed_version INTEGER,
    input TEXT NOT NULL,
    expected TEXT,
    metadata TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    digest TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX dataset_records_range ON dataset_records(dataset_id, added_version, removed_version);
CREATE INDEX dataset_records_live_key ON dataset_records(dataset_id, key) WHERE key IS NOT NULL AND removed_version IS NULL;

-- The dataset version an experiment ran over (kept when the dataset is deleted: RunResults still says
-- what ran).
CREATE TABLE experiment_datasets (
    experiment_id TEXT PRIMARY KEY REFERENCES experiments(id) ON DELETE CASCADE,
    dataset_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    digest TEXT NOT NULL,
    tags TEXT
);
