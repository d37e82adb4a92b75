-- The global concurrency limit each job started under (daemon/runner/concurrency.py): a result says
-- what the daemon chose.
ALTER TABLE scenario_jobs ADD COLUMN concurrency INTEGER;
