-- Alerts (issue 14): the tenant's default notification route, used by behaviors without their own
-- `notify` (SPEC: "routing is set at behavior or workspace level"), and the reference side of a
-- `baseline_direction: either` latch.
CREATE TABLE alert_default_routes (
    tenant_id TEXT PRIMARY KEY REFERENCES tenants(id),
    notify TEXT NOT NULL,
    webhook_url TEXT,
    slack_channel TEXT,
    email_to TEXT,
    secret TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- 'owner': the rule's or behavior's own routing (signed with its secret); 'default': the tenant's
-- default route (signed with that route's secret; not sent once the route is removed).
ALTER TABLE alert_outbox ADD COLUMN routed TEXT NOT NULL DEFAULT 'owner';

-- either: the side of baseline_pct ('above' or 'below') the rate was first seen on with the minimum
-- sample; crossing to the other side breaches, coming back recovers.
ALTER TABLE behaviors ADD COLUMN latch_side TEXT;
