-- An experiment may answer its runs' model calls from another experiment's recordings, and may
-- override the spec's models.budget for its runs.
ALTER TABLE experiments ADD COLUMN replay_models_from TEXT;
ALTER TABLE experiments ADD COLUMN models_budget TEXT;
