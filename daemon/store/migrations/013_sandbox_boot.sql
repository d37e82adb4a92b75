-- How each sandbox booted (issue 18, warm pool): served from the pool or booted cold, and the
-- milliseconds from the create request to ready. NULL until the boot finished.
ALTER TABLE sandboxes ADD COLUMN boot_pooled INTEGER;
ALTER TABLE sandboxes ADD COLUMN boot_ms REAL;
