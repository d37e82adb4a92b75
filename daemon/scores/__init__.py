"""Score rules and offline scoring: rules scoring an experiment's spans into append-only score rows
(a job kind on the engine), the spec's `score_rules:`, and the per-rule aggregates."""
