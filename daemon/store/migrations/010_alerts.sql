-- Alerts (issue 14) and behaviors (issue 13): metric rules on experiments, behaviors with their
-- verdicts and breach latch, and the durable outbox of notifications with its attempt log.
-- `secret` signs webhook notifications (X-Svc-Signature, as daemon/webhooks does); it is shown once.
CREATE TABLE alert_rules (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    eval_id TEXT,
    condition TEXT NOT NULL,
    metric TEXT NOT NULL,
    operator TEXT NOT NULL,
    threshold REAL NOT NULL,
    window TEXT,
    notify TEXT NOT NULL,
    slack_channel TEXT,
    webhook_url TEXT,
    email_to TEXT,
    secret TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT 'api',
    state TEXT NOT NULL DEFAULT 'no_data',
    created_at TEXT NOT NULL,
    last_fired_at TEXT
);
CREATE INDEX alert_rules_tenant ON alert_rules(tenant_id, seq);
CREATE INDEX alert_rules_eval ON alert_rules(tenant_id, eval_id);

-- latch_breached is the edge-trigger state; latch_flips counts its flips (part of the outbox dedup key).
CREATE TABLE behaviors (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    description TEXT,
    kind TEXT NOT NULL,
    judge_id TEXT,
    rule_id TEXT,
    labels TEXT,
    baseline_pct REAL NOT NULL,
    baseline_direction TEXT NOT NULL,
    notify TEXT,
    slack_channel TEXT,
    webhook_url TEXT,
    email_to TEXT,
    secret TEXT NOT NULL,
    latch_breached INTEGER NOT NULL DEFAULT 0,
    latch_flips INTEGER NOT NULL DEFAULT 0,
    latch_changed_at TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX behaviors_tenant ON behaviors(tenant_id, seq);

-- detected is NULL for a judge-error verdict (never counted in the rate).
CREATE TABLE behavior_verdicts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    behavior_id TEXT NOT NULL REFERENCES behaviors(id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    detected INTEGER,
    judge_error TEXT,
    trace_id TEXT,
    span_id TEXT,
    label TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX behavior_verdicts_behavior ON behavior_verdicts(behavior_id, seq);

-- One row per notification, written in the same transaction as the evaluation or latch flip that
-- decided it; dedup_key is unique so a decision taken twice (a replayed hook, a restart) queues once.
CREATE TABLE alert_outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    rule_id TEXT REFERENCES alert_rules(id) ON DELETE CASCADE,
    behavior_id TEXT REFERENCES behaviors(id) ON DELETE CASCADE,
    event TEXT NOT NULL,
    dedup_key TEXT NOT NULL UNIQUE,
    experiment_id TEXT,
    channel TEXT NOT NULL,
    destination TEXT,
    payload TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    last_error TEXT,
    response_status INTEGER,
    created_at TEXT NOT NULL,
    sent_at TEXT
);
CREATE INDEX alert_outbox_due ON alert_outbox(status, next_attempt_at);
CREATE INDEX alert_outbox_rule ON alert_outbox(rule_id, seq);
CREATE INDEX alert_outbox_behavior ON alert_outbox(behavior_id, seq);
CREATE INDEX alert_outbox_recent ON alert_outbox(rule_id, experiment_id, created_at);

CREATE TABLE alert_attempts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    outbox_id TEXT NOT NULL REFERENCES alert_outbox(id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    at TEXT NOT NULL,
    response_status INTEGER,
    error TEXT
);
CREATE INDEX alert_attempts_outbox ON alert_attempts(outbox_id, seq);
