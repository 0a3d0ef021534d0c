-- Erasures of users' data: one row per erased user, written in the transaction that ends the
-- user's access, worked through in bounded batches under a lease (so an erasure interrupted by
-- a crash or a restart resumes where it stopped), and kept once finished as the record that it
-- happened. Ids, times and a count only: no email or other personal data. `requested_by` is
-- the administrator who asked (NULL when the user did).
CREATE TABLE user_erasures (
    user_id BLOB PRIMARY KEY NOT NULL,
    requested_at TEXT NOT NULL,
    requested_by BLOB,
    lease_owner TEXT,
    lease_until TEXT,
    deleted_rows BIGINT NOT NULL DEFAULT 0,
    finished_at TEXT
);
CREATE INDEX user_erasures_pending ON user_erasures (finished_at, requested_at);
