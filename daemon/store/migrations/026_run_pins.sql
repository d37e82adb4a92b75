-- What a run depended on, resolved when it ran (the agent snapshot id, the model recording): its
-- reproducer and its replays use exactly these, not whatever is latest.
ALTER TABLE runs ADD COLUMN pins TEXT;
