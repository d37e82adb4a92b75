-- Where each sandbox runs (issue 39): the swarm node of its agent container, `local` on the
-- daemon's own engine. NULL until the agent container started.
ALTER TABLE sandboxes ADD COLUMN node TEXT;
