-- Idempotency records belong to the principal that sent the request (an API key, a sandbox token),
-- not to the whole tenant: an agent's sandbox token could otherwise take an Idempotency-Key the
-- tenant sends later (409, or another request's answer replayed). The records are a replay cache of
-- at most SERVICE_IDEMPOTENCY_TTL: those stored before this migration name no principal and are dropped.
DROP TABLE idempotency;
CREATE TABLE idempotency (
    tenant_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    key TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    status INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    body BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant_id, principal, key)
);
CREATE INDEX idempotency_created ON idempotency(created_at);
