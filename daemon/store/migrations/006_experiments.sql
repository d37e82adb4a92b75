-- Experiments, their scenarios, replica suites, and the persisted scenario-job queue (issue 6).
-- Secret values are never stored: only their names (secret_names).
CREATE TABLE experiments (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    spec_id TEXT NOT NULL,
    spec_version INTEGER NOT NULL,
    status TEXT NOT NULL,
    replicas INTEGER NOT NULL,
    concurrency INTEGER,
    matrix TEXT NOT NULL,
    inputs TEXT,
    base_seed TEXT NOT NULL,
    filter_failing_from TEXT,
    secret_names TEXT NOT NULL DEFAULT '[]',
    total_runs INTEGER NOT NULL,
    error TEXT,
    summary TEXT,
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT
);
CREATE INDEX experiments_tenant ON experiments(tenant_id, seq);
CREATE INDEX experiments_spec ON experiments(tenant_id, spec_id, seq);
CREATE INDEX experiments_status ON experiments(status);

CREATE TABLE scenarios (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    experiment_id TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    matrix_index INTEGER NOT NULL,
    matrix_entry TEXT NOT NULL,
    replicas INTEGER NOT NULL,
    status TEXT NOT NULL,
    verdict TEXT,
    passed INTEGER,
    score REAL,
    finished_at TEXT
);
CREATE INDEX scenarios_experiment ON scenarios(experiment_id, seq);
CREATE INDEX scenarios_status ON scenarios(experiment_id, status);

CREATE TABLE replica_suites (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    spec_id TEXT NOT NULL,
    spec_version INTEGER NOT NULL,
    n_replicas INTEGER NOT NULL,
    inputs TEXT,
    base_seed TEXT NOT NULL,
    secret_names TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL,
    error TEXT,
    created_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX replica_suites_tenant ON replica_suites(tenant_id, seq);

-- One row per replica run of a scenario (experiments) or per replica (suites).
-- state: pending (experiment not started) | queued | running | done | cancelled.
-- attempts counts dispatches; a job found `running` at start-up is retried once, then errored
-- with reason daemon_restart.
CREATE TABLE scenario_jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    group_kind TEXT NOT NULL,
    group_id TEXT NOT NULL,
    scenario_id TEXT,
    matrix_index INTEGER NOT NULL DEFAULT 0,
    replica_index INTEGER NOT NULL,
    seed TEXT NOT NULL,
    run_id TEXT NOT NULL,
    previous_run_ids TEXT NOT NULL DEFAULT '[]',
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    status TEXT,
    score REAL,
    error TEXT,
    result TEXT,
    wall_ms INTEGER,
    cost_usd REAL,
    queued_at TEXT,
    started_at TEXT,
    finished_at TEXT,
    done_seq INTEGER
);
CREATE INDEX scenario_jobs_group ON scenario_jobs(group_id, seq);
CREATE INDEX scenario_jobs_scenario ON scenario_jobs(scenario_id, replica_index);
CREATE INDEX scenario_jobs_run ON scenario_jobs(run_id);
CREATE INDEX scenario_jobs_live ON scenario_jobs(state) WHERE state IN ('queued', 'running');
