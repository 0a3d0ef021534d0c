-- The unfiltered transaction count of an account, kept in step with inserts in the same
-- transaction, so paging a long history does not count every row on each request.
ALTER TABLE accounts ADD COLUMN transaction_count BIGINT NOT NULL DEFAULT 0;
UPDATE accounts SET transaction_count = (
    SELECT COUNT(*) FROM transactions t WHERE t.account_id = accounts.id
);
