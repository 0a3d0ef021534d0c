-- Administration: the security configuration (one row), the audit trail of token rotations,
-- and the leases and run records of background jobs.

CREATE TABLE security_config (
    id INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    global_min_token_version INTEGER NOT NULL DEFAULT 0,
    grace_period_seconds INTEGER NOT NULL,
    last_rotation_at TEXT,
    last_rotation_reason TEXT,
    updated_at TEXT NOT NULL
);

CREATE TABLE token_rotations (
    id BLOB PRIMARY KEY NOT NULL,
    scope TEXT NOT NULL,
    user_id BLOB,
    previous_version INTEGER NOT NULL,
    new_version INTEGER NOT NULL,
    reason TEXT NOT NULL,
    initiated_by BLOB,
    created_at TEXT NOT NULL
);
CREATE INDEX token_rotations_created ON token_rotations (created_at);
CREATE INDEX token_rotations_user ON token_rotations (user_id);

CREATE TABLE job_runs (
    name TEXT PRIMARY KEY NOT NULL,
    lease_owner TEXT,
    lease_expires_at TEXT,
    last_started_at TEXT,
    last_finished_at TEXT,
    last_success_at TEXT,
    last_error TEXT,
    runs INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX sessions_expiry ON sessions (expires_at);
