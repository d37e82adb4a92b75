-- Trace events (issue 7). One row per ingested event; a span is the set of rows sharing span_id
-- (a `start` + `end` pair, or one `complete` / `invoked` row). `head` = 1 on the first row seen for
-- a span, so span listings page over one row per span. `root_span_id` is NULL while a span's root
-- is not known yet (OTLP children exported before their parent); it is filled in when the root arrives.
-- Partial indexes skip rows where the column is NULL, which keeps ingest cheap.
CREATE TABLE trace_events (
    seq INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_span_id TEXT,
    root_span_id TEXT,
    head INTEGER NOT NULL DEFAULT 1,
    ts TEXT NOT NULL,
    event_type TEXT NOT NULL,
    phase TEXT NOT NULL,
    tool TEXT,
    status TEXT,
    error_type TEXT,
    duration_ms INTEGER,
    model TEXT,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cached_tokens INTEGER,
    cost_usd REAL,
    cost TEXT,
    input TEXT,
    output TEXT,
    metadata TEXT,
    sandbox_id TEXT,
    run_id TEXT,
    experiment_id TEXT,
    scenario_id TEXT,
    agent TEXT,
    agent_version TEXT,
    source TEXT NOT NULL,
    received_at TEXT NOT NULL
);
CREATE INDEX trace_events_tenant ON trace_events(tenant_id, seq);
CREATE INDEX trace_events_trace ON trace_events(trace_id, seq);
CREATE INDEX trace_events_span ON trace_events(span_id);
CREATE INDEX trace_events_parent ON trace_events(parent_span_id) WHERE parent_span_id IS NOT NULL;
CREATE INDEX trace_events_root ON trace_events(root_span_id, seq) WHERE root_span_id IS NOT NULL;
CREATE INDEX trace_events_sandbox ON trace_events(sandbox_id, seq) WHERE sandbox_id IS NOT NULL;
CREATE INDEX trace_events_experiment ON trace_events(experiment_id, seq) WHERE experiment_id IS NOT NULL;
CREATE INDEX trace_events_run ON trace_events(run_id, seq) WHERE run_id IS NOT NULL;
CREATE INDEX trace_events_agent ON trace_events(tenant_id, agent, seq) WHERE agent IS NOT NULL;
CREATE INDEX trace_events_tool ON trace_events(tenant_id, tool, seq) WHERE tool IS NOT NULL;
CREATE INDEX trace_events_type ON trace_events(tenant_id, event_type, seq);
CREATE INDEX trace_events_ts ON trace_events(tenant_id, ts);
