-- Search across accounts: the words of each transaction's description, merchant name and
-- notes in an FTS5 index.
--
-- External content on the table's rowid: the index keeps only its word lists (no column sizes:
-- nothing ranks), the text stays in `transactions`, and triggers keep both in step (an update
-- only when the text changed). The store writes rows many to a statement: FTS5 flushes its
-- pending words at every statement, so one row per statement would cost far more.
-- `remove_diacritics 0` keeps accented letters as they are, as PostgreSQL's `simple`
-- configuration does, so both stores match the same words. A rebuild of `transactions` that
-- renumbers its rowids must be followed by
-- `INSERT INTO transactions_search (transactions_search) VALUES ('rebuild')`.
CREATE VIRTUAL TABLE transactions_search USING fts5 (
    description,
    merchant_name,
    notes,
    content = 'transactions',
    content_rowid = 'rowid',
    columnsize = 0,
    tokenize = 'unicode61 remove_diacritics 0'
);
INSERT INTO transactions_search (transactions_search) VALUES ('rebuild');

CREATE TRIGGER transactions_search_insert AFTER INSERT ON transactions
WHEN new.description IS NOT NULL OR new.merchant_name IS NOT NULL OR new.notes IS NOT NULL
BEGIN
    INSERT INTO transactions_search (rowid, description, merchant_name, notes)
    VALUES (new.rowid, new.description, new.merchant_name, new.notes);
END;

CREATE TRIGGER transactions_search_delete AFTER DELETE ON transactions
WHEN old.description IS NOT NULL OR old.merchant_name IS NOT NULL OR old.notes IS NOT NULL
BEGIN
    INSERT INTO transactions_search (transactions_search, rowid, description, merchant_name, notes)
    VALUES ('delete', old.rowid, old.description, old.merchant_name, old.notes);
END;

CREATE TRIGGER transactions_search_update AFTER UPDATE OF description, merchant_name, notes
ON transactions
WHEN old.description IS NOT new.description OR old.merchant_name IS NOT new.merchant_name
    OR old.notes IS NOT new.notes
BEGIN
    INSERT INTO transactions_search (transactions_search, rowid, description, merchant_name, notes)
    SELECT 'delete', old.rowid, old.description, old.merchant_name, old.notes
    WHERE old.description IS NOT NULL OR old.merchant_name IS NOT NULL OR old.notes IS NOT NULL;
    INSERT INTO transactions_search (rowid, description, merchant_name, notes)
    SELECT new.rowid, new.description, new.merchant_name, new.notes
    WHERE new.description IS NOT NULL OR new.merchant_name IS NOT NULL OR new.notes IS NOT NULL;
END;

