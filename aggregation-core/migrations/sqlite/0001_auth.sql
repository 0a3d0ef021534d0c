CREATE TABLE users (
    id BLOB PRIMARY KEY NOT NULL,
    email TEXT NOT NULL,
    email_normalized TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    email_verified_at TEXT,
    min_token_version INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE user_roles (
    user_id BLOB NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    granted_at TEXT NOT NULL,
    PRIMARY KEY (user_id, role)
);

CREATE TABLE one_time_tokens (
    digest BLOB PRIMARY KEY NOT NULL,
    purpose TEXT NOT NULL,
    user_id BLOB NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT,
    ip_address TEXT,
    user_agent TEXT
);
CREATE INDEX one_time_tokens_user ON one_time_tokens (user_id, purpose, created_at);
CREATE INDEX one_time_tokens_expiry ON one_time_tokens (expires_at);

CREATE TABLE sessions (
    id BLOB PRIMARY KEY NOT NULL,
    user_id BLOB NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    device_info TEXT,
    ip_address TEXT,
    user_agent TEXT,
    location TEXT,
    created_at TEXT NOT NULL,
    last_activity_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT,
    revoked_reason TEXT
);
CREATE INDEX sessions_user ON sessions (user_id, created_at);

CREATE TABLE refresh_tokens (
    digest BLOB PRIMARY KEY NOT NULL,
    session_id BLOB NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    user_id BLOB NOT NULL,
    token_version INTEGER NOT NULL,
    issued_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    rotated_at TEXT,
    revoked_at TEXT
);
CREATE INDEX refresh_tokens_session ON refresh_tokens (session_id);
CREATE INDEX refresh_tokens_expiry ON refresh_tokens (expires_at);
