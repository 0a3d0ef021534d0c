-- A change-feed provider's cursor per connection (Plaid's `/transactions/sync` cursor): where
-- the next sync goes on from. Written in the same transaction as the rows it covers, so a
-- sync that fails keeps the old cursor. Opaque to the service; the provider that made it
-- checks that it belongs to the credentials it is given.
CREATE TABLE provider_cursors (
    connection_id BLOB PRIMARY KEY REFERENCES connections (id) ON DELETE CASCADE,
    cursor TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

-- What a provider's webhooks name a connection by (Plaid's `item_id`), as its SHA-256 digest:
-- an inbound webhook finds its connection without the identifier being stored in clear.
CREATE TABLE provider_webhook_keys (
    connection_id BLOB PRIMARY KEY REFERENCES connections (id) ON DELETE CASCADE,
    provider_slug TEXT NOT NULL,
    key_digest BLOB NOT NULL
);
CREATE INDEX provider_webhook_keys_lookup ON provider_webhook_keys (provider_slug, key_digest);
