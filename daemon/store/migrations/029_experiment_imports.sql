-- An experiment brought in from a baseline bundle (svc eval import): where it came from
-- ({experiment_id, exported_at, spec_digest}); NULL for an experiment this daemon ran.
ALTER TABLE experiments ADD COLUMN imported TEXT;
