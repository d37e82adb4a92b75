-- LLM judges of a tenant (daemon/judges): the definition and the last calibration (JSON).
CREATE TABLE judges (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    rubric TEXT NOT NULL,
    model TEXT,
    threshold REAL NOT NULL,
    kind TEXT NOT NULL,
    choices TEXT,
    calibration TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX judges_tenant ON judges(tenant_id, seq);

-- Successful judge verdicts by content address (sha256 over model, rubric, kind, choices, input,
-- output, expected), per tenant ('' for calls made on no tenant's behalf): a hit makes no HTTP call.
CREATE TABLE judge_cache (
    tenant_id TEXT NOT NULL,
    key TEXT NOT NULL,
    score REAL NOT NULL,
    label TEXT,
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
