-- Score rules, offline scoring jobs and their append-only score rows (issue 13).
-- A rule declared in a spec's `score_rules:` has source 'spec' and eval_id = the spec id; it is
-- updated in place (same id) on each upload of that spec, and deleted when no longer declared.
CREATE TABLE score_rules (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    eval_id TEXT,
    type TEXT NOT NULL,
    rubric TEXT,
    pattern TEXT,
    command TEXT,
    judge_id TEXT,
    model TEXT,
    threshold REAL,
    applies_to TEXT NOT NULL DEFAULT '{}',
    source TEXT NOT NULL DEFAULT 'api',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX score_rules_tenant ON score_rules(tenant_id, seq);
CREATE INDEX score_rules_eval ON score_rules(tenant_id, eval_id);

-- status: queued | running | completed | failed. A job found queued or running at start-up is
-- submitted again; the spans it already scored (rows with its job_id) are skipped.
CREATE TABLE score_jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    experiment_id TEXT NOT NULL,
    rule_ids TEXT NOT NULL,
    trigger TEXT NOT NULL,
    status TEXT NOT NULL,
    total INTEGER,
    done INTEGER NOT NULL DEFAULT 0,
    errors INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT
);
CREATE INDEX score_jobs_experiment ON score_jobs(experiment_id, seq);
CREATE INDEX score_jobs_live ON score_jobs(status) WHERE status IN ('queued', 'running');

-- Appended, never updated: a re-score adds rows; reads take the latest per (span, rule).
CREATE TABLE scores (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    experiment_id TEXT NOT NULL,
    scenario_id TEXT,
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    rule_id TEXT NOT NULL,
    score REAL,
    passed INTEGER,
    reason TEXT,
    judge_error TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX scores_latest ON scores(experiment_id, span_id, rule_id, seq);
CREATE INDEX scores_rule ON scores(experiment_id, rule_id, seq);
CREATE UNIQUE INDEX scores_once_per_job ON scores(job_id, span_id, rule_id);
