-- Team chat (issue 16): Slack workspaces installed per tenant, OAuth states, processed event ids,
-- and the investigation agent's conversations with their messages.

-- One row per Slack workspace (team); a reinstall updates it in place. bot_token is a secret kept
-- like secrets.value: never returned by the API, never logged.
CREATE TABLE chat_installations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id TEXT NOT NULL UNIQUE,
    team_name TEXT,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    app_id TEXT,
    bot_user_id TEXT,
    bot_token TEXT NOT NULL,
    scope TEXT,
    installed_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_event_at TEXT
);
CREATE INDEX chat_installations_tenant ON chat_installations(tenant_id, seq);

-- The nonce of every install URL issued: single use (used_at) and bound to its tenant.
CREATE TABLE chat_oauth_states (
    nonce TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    expires_at REAL NOT NULL,
    used_at REAL
);

-- Event deliveries already handled: Slack retries (X-Slack-Retry-Num) and duplicate deliveries
-- carry the same event_id or the same team:channel:ts and are acknowledged without a second reply.
CREATE TABLE chat_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    message_key TEXT UNIQUE,
    team_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    received_at TEXT NOT NULL
);

CREATE TABLE conversations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    title TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    chat_key TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX conversations_tenant ON conversations(tenant_id, seq);
CREATE UNIQUE INDEX conversations_chat_key ON conversations(tenant_id, chat_key) WHERE chat_key IS NOT NULL;

-- role: user | assistant. tool_calls: the tools the agent called for an answer [{name, arguments}];
-- error: set when the model failed (the answer then says so, it is never invented).
CREATE TABLE conversation_messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    tenant_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_calls TEXT,
    error TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX conversation_messages_conversation ON conversation_messages(conversation_id, seq);
