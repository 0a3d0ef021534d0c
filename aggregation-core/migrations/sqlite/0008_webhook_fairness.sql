-- Fair webhook delivery: endpoints that keep failing are disabled, and a rotated secret keeps
-- signing beside the new one for a while.
-- `failing_since`: the first failed attempt since the endpoint's last success (NULL while it
-- answers); an endpoint still failing 24 h later is disabled (`disabled_at`) until its owner
-- enables it again. `previous_*`: the secret before the last rotation (encrypted like the
-- current one, bound to the endpoint id) and when it stops signing.
ALTER TABLE webhook_endpoints ADD COLUMN failing_since TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN disabled_at TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN previous_encrypted_secret BLOB;
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_key_id TEXT;
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_expires_at TEXT;

-- The claim's per-endpoint count of deliveries in flight (leased).
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (endpoint_id, lease_until)
    WHERE status = 'pending' AND lease_until IS NOT NULL;
