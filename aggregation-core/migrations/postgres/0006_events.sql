-- The outbox of durable domain events, written in the transaction of the change that caused
-- each one. Ids are UUIDv7, so id order is the order events were raised in; `data` is the JSON
-- payload (ids and counts, never secrets). No foreign key on user_id: the audit trail outlives
-- what it records, until the retention purge.
CREATE TABLE events (
    id UUID PRIMARY KEY,
    type TEXT NOT NULL,
    user_id UUID,
    occurred_at TIMESTAMPTZ NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX events_user ON events (user_id, id);
CREATE INDEX events_type ON events (type, id);
CREATE INDEX events_occurred ON events (occurred_at);
