-- Runs (issue 5) and webhook destinations with their delivery log.
-- A run row is written when queued and updated in place; `result` holds the scored outcome
-- (invariant results, violations, reproducer, timings) as JSON, `trajectory_digest` names the
-- trajectory blob in blobs/sha256.
CREATE TABLE runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    spec_id TEXT NOT NULL,
    spec_version INTEGER NOT NULL,
    sandbox_id TEXT,
    own_sandbox INTEGER NOT NULL DEFAULT 1,
    status TEXT NOT NULL,
    verdict TEXT,
    reason TEXT,
    score REAL,
    seed TEXT NOT NULL,
    inputs TEXT,
    matrix_entry TEXT,
    secret_names TEXT,
    experiment_id TEXT,
    scenario_id TEXT,
    replay_of TEXT,
    agent TEXT,
    result TEXT,
    trajectory_digest TEXT,
    duration_ms INTEGER,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT
);
CREATE INDEX runs_tenant ON runs(tenant_id, seq);
CREATE INDEX runs_status ON runs(status);
CREATE INDEX runs_spec ON runs(tenant_id, spec_id, seq);
CREATE INDEX runs_experiment ON runs(experiment_id, seq) WHERE experiment_id IS NOT NULL;

CREATE TABLE webhooks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX webhooks_tenant ON webhooks(tenant_id, seq);

CREATE TABLE webhook_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    event TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    response_status INTEGER,
    error TEXT,
    created_at TEXT NOT NULL,
    last_attempt_at TEXT,
    delivered_at TEXT
);
CREATE INDEX webhook_deliveries_hook ON webhook_deliveries(webhook_id, seq);
CREATE INDEX webhook_deliveries_status ON webhook_deliveries(status);
