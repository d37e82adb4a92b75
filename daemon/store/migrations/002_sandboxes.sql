-- Sandboxes (both shapes) and the daemon's own persistent identity.
CREATE TABLE sandboxes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    daemon_id TEXT NOT NULL,
    shape TEXT NOT NULL,
    state TEXT NOT NULL,
    image TEXT,
    services TEXT NOT NULL DEFAULT '[]',
    seed TEXT NOT NULL,
    spec_id TEXT,
    spec_version INTEGER,
    metadata TEXT NOT NULL DEFAULT '{}',
    resources TEXT NOT NULL DEFAULT '{}',
    secret_names TEXT NOT NULL DEFAULT '[]',
    limits_exceeded TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    ready_at TEXT,
    expires_at TEXT,
    stopped_at TEXT,
    stop_reason TEXT,
    error_step TEXT,
    error_message TEXT
);
CREATE INDEX sandboxes_tenant_state ON sandboxes(tenant_id, state);
CREATE INDEX sandboxes_daemon_state ON sandboxes(daemon_id, state);
CREATE INDEX sandboxes_spec ON sandboxes(spec_id);

CREATE TABLE daemon_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
