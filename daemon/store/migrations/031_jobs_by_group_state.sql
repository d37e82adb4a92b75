-- A finished replica asks whether its experiment still has queued or running jobs: by (group, state)
-- that is a lookup, not a scan of every job the experiment ever had (flat cost as experiments grow).
CREATE INDEX scenario_jobs_group_state ON scenario_jobs(group_id, state);
