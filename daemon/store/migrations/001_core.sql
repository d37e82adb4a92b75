-- Tenants, API keys, sandbox tokens, idempotency records, specs and their versions.
CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    is_admin INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);

CREATE TABLE api_keys (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    rotated_at TEXT,
    last_used_at TEXT
);

CREATE TABLE sandbox_tokens (
    secret_sha256 TEXT PRIMARY KEY,
    sandbox_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    created_at TEXT NOT NULL
);
CREATE INDEX sandbox_tokens_sandbox ON sandbox_tokens(sandbox_id);

CREATE TABLE idempotency (
    tenant_id TEXT NOT NULL,
    key TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    status INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_created ON idempotency(created_at);

CREATE TABLE specs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    latest_version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX specs_tenant_name ON specs(tenant_id, name);

CREATE TABLE spec_versions (
    spec_id TEXT NOT NULL REFERENCES specs(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    name TEXT NOT NULL,
    yaml TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (spec_id, version)
);

CREATE TABLE secrets (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
