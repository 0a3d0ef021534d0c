-- Administration: the security configuration (one row), the audit trail of token rotations,
-- and the leases and run records of background jobs.

CREATE TABLE security_config (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    global_min_token_version BIGINT NOT NULL DEFAULT 0,
    grace_period_seconds BIGINT NOT NULL,
    last_rotation_at TIMESTAMPTZ,
    last_rotation_reason TEXT,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE token_rotations (
    id UUID PRIMARY KEY,
    scope TEXT NOT NULL,
    user_id UUID,
    previous_version BIGINT NOT NULL,
    new_version BIGINT NOT NULL,
    reason TEXT NOT NULL,
    initiated_by UUID,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX token_rotations_created ON token_rotations (created_at);
CREATE INDEX token_rotations_user ON token_rotations (user_id);

CREATE TABLE job_runs (
    name TEXT PRIMARY KEY,
    lease_owner TEXT,
    lease_expires_at TIMESTAMPTZ,
    last_started_at TIMESTAMPTZ,
    last_finished_at TIMESTAMPTZ,
    last_success_at TIMESTAMPTZ,
    last_error TEXT,
    runs BIGINT NOT NULL DEFAULT 0,
    failures BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX sessions_expiry ON sessions (expires_at);
