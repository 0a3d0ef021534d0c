-- The networks each user logged in from, for the failed-login throttle: a network where the
-- account logged in within 30 days is not refused because of other networks' failures.
-- `network_digest` is a keyed SHA-256 of the user id and the client's /24 (IPv4) or /64
-- (IPv6), never the address itself. Rows go 30 days after their last successful login
-- (`purge_expired`), and each user keeps only their most recent ones.
CREATE TABLE login_networks (
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    network_digest BYTEA NOT NULL,
    last_success_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, network_digest)
);
CREATE INDEX login_networks_last_success ON login_networks (last_success_at);
