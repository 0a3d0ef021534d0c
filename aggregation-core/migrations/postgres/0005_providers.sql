-- Provider connections: pending OAuth authorizations, the clear expiry of each connection's
-- access token (for the refresh job), and the cool-downs of provider syncs.

-- The state value itself is never stored, only its SHA-256 digest.
CREATE TABLE oauth_states (
    state_digest BYTEA PRIMARY KEY,
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider_slug TEXT NOT NULL,
    alias TEXT,
    redirect_uri TEXT NOT NULL,
    encrypted_pkce_verifier BYTEA,
    pkce_key_id TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX oauth_states_expiry ON oauth_states (expires_at);

ALTER TABLE connections ADD COLUMN credentials_expires_at TIMESTAMPTZ;
-- The background jobs' look-ups: active connections with credentials, by token expiry
-- (refresh) and by last sync, never-synced first (sync).
CREATE INDEX connections_due_refresh ON connections (credentials_expires_at, id)
    WHERE status = 'active' AND encrypted_credentials IS NOT NULL;
CREATE INDEX connections_due_sync ON connections (last_sync_at NULLS FIRST, id)
    WHERE status = 'active' AND encrypted_credentials IS NOT NULL;

-- One row per synced subject (a connection, or an account for holdings) and kind: when its
-- last claimed sync started, and the start before that (returned by the claim that replaced
-- it, so a failed sync can hand it back).
CREATE TABLE sync_claims (
    subject_id UUID NOT NULL,
    kind TEXT NOT NULL,
    last_started_at TIMESTAMPTZ NOT NULL,
    previous_started_at TIMESTAMPTZ,
    PRIMARY KEY (subject_id, kind)
);
