-- Webhook endpoints (Standard Webhooks), the deliveries the event outbox queues for them, and
-- every delivery attempt. The signing secret is stored only encrypted, bound to the endpoint
-- id. `event_types` is the comma-framed list of type names the endpoint receives
-- (",a,b,"), empty for every type, so the outbox's fan-out matches with one LIKE.
CREATE TABLE webhook_endpoints (
    id BLOB PRIMARY KEY NOT NULL,
    user_id BLOB NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    event_types TEXT NOT NULL,
    encrypted_secret BLOB NOT NULL,
    secret_key_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX webhook_endpoints_user ON webhook_endpoints (user_id, created_at);

-- One event for one endpoint; the event id is the `webhook-id` of every attempt, and the
-- payload the exact body signed and sent.
CREATE TABLE webhook_deliveries (
    endpoint_id BLOB NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id BLOB NOT NULL,
    event_type TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt_count INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT,
    lease_until TEXT,
    created_at TEXT NOT NULL,
    delivered_at TEXT,
    PRIMARY KEY (endpoint_id, event_id)
);
-- The delivery job's look-up: pending deliveries by due time.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_listing ON webhook_deliveries (endpoint_id, created_at);
-- The purge of finished deliveries by age.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (created_at)
    WHERE status <> 'pending';

CREATE TABLE webhook_attempts (
    endpoint_id BLOB NOT NULL,
    event_id BLOB NOT NULL,
    attempt INTEGER NOT NULL,
    attempted_at TEXT NOT NULL,
    status_code INTEGER,
    error TEXT,
    PRIMARY KEY (endpoint_id, event_id, attempt),
    FOREIGN KEY (endpoint_id, event_id) REFERENCES webhook_deliveries (endpoint_id, event_id)
        ON DELETE CASCADE
);
