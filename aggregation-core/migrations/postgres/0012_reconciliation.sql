-- Reconciliation: one row per real transaction, whatever the source.
--
-- `source` says which kind of source wrote a row (`sync` or `import`), `origin` which one
-- exactly (the provider's slug, or the file format's code): rows are compared as duplicates
-- only across origins. Rows written before this migration take their connection's kind.
ALTER TABLE transactions ADD COLUMN source TEXT NOT NULL DEFAULT 'import';
ALTER TABLE transactions ADD COLUMN origin TEXT NOT NULL DEFAULT 'file_import';
-- The provider id of the pending row a booked row replaced (it kept that row's id).
ALTER TABLE transactions ADD COLUMN pending_transaction_id TEXT;
-- The other leg of a transfer between two of the user's accounts.
ALTER TABLE transactions ADD COLUMN transfer_transaction_id UUID;

UPDATE transactions SET
    source = CASE WHEN c.provider_slug = 'file_import' THEN 'import' ELSE 'sync' END,
    origin = c.provider_slug
FROM accounts a JOIN connections c ON c.id = a.connection_id
WHERE a.id = transactions.account_id;

-- The matcher's candidates: one account's rows within a few days, compared by amount.
CREATE INDEX transactions_reconcile ON transactions (account_id, transaction_date, amount);
CREATE INDEX transactions_transfer ON transactions (transfer_transaction_id);

CREATE TABLE transaction_matches (
    id UUID PRIMARY KEY,
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    -- The row that was there first (a duplicate's kept row; a transfer's first leg).
    transaction_id UUID NOT NULL REFERENCES transactions (id) ON DELETE CASCADE,
    -- The other row when it is written (a duplicate's newer row; a transfer's other leg).
    other_transaction_id UUID REFERENCES transactions (id) ON DELETE CASCADE,
    -- The account and provider id of the other row, written or held back.
    account_id UUID NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    provider_transaction_id TEXT NOT NULL,
    -- A duplicate held back (not written): its fields, to write it when the match is rejected.
    held TEXT,
    confidence TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX transaction_matches_user ON transaction_matches (user_id, id);
CREATE INDEX transaction_matches_incoming
    ON transaction_matches (account_id, provider_transaction_id);
CREATE INDEX transaction_matches_first ON transaction_matches (transaction_id);
CREATE INDEX transaction_matches_other ON transaction_matches (other_transaction_id);
