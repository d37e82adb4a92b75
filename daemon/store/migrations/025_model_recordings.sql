-- The model gateway: whether a run's model answers were live or replayed, and the content digest
-- of its model recording (the one it made, or the one it replayed).
ALTER TABLE runs ADD COLUMN models TEXT;
ALTER TABLE runs ADD COLUMN model_recording TEXT;
ALTER TABLE runs ADD COLUMN model_spend TEXT;
