-- Accounts a large import created and is still filling in bounded batches (each its own
-- short write transaction, so that no other writer waits long for SQLite's write lock). The
-- row goes in the import's first transaction and is deleted in its last; until then the
-- account is the import's own. When the import fails, or is abandoned (the process stopped),
-- the account is removed with everything written into it, and the connection too when the
-- import created it and it holds nothing else: the import leaves nothing, as one transaction
-- would. Abandoned rows are removed by the user's next large import and at start.
CREATE TABLE import_staging (
    account_id BLOB PRIMARY KEY NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    import_id BLOB NOT NULL,
    user_id BLOB NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The connection the import created for the account, if it did.
    connection_id BLOB REFERENCES connections (id) ON DELETE CASCADE,
    started_at TEXT NOT NULL
);
CREATE INDEX import_staging_user ON import_staging (user_id, started_at);
CREATE INDEX import_staging_import ON import_staging (import_id);
