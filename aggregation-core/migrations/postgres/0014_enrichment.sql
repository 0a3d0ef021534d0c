-- Enrichment: categories, merchant names, notes and rules.
--
-- On each transaction: its `category` (a taxonomy detailed id such as `FOOD_AND_DRINK_COFFEE`,
-- or a user's own `custom:<uuid>`) with the `category_source` that chose it (`user`, `rule`,
-- `provider`, `merchant_code`, `bank_code`, `transfer`), its `merchant_name` and `notes`. The
-- `*_by_user` flags say which of the three the user set: the writer never changes those again
-- (a user's choice survives every re-sync and re-import, a cleared field included). The
-- signals the source gave (the provider's category, the ISO 18245 merchant category code, the
-- ISO 20022 bank transaction code) are kept so that categories can be chosen again when rules
-- or custom categories change. Additive: existing rows keep every value and start uncategorised.
ALTER TABLE transactions ADD COLUMN category TEXT;
ALTER TABLE transactions ADD COLUMN category_source TEXT;
ALTER TABLE transactions ADD COLUMN merchant_name TEXT;
ALTER TABLE transactions ADD COLUMN notes TEXT;
ALTER TABLE transactions ADD COLUMN category_by_user BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE transactions ADD COLUMN merchant_name_by_user BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE transactions ADD COLUMN notes_by_user BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE transactions ADD COLUMN provider_category TEXT;
ALTER TABLE transactions ADD COLUMN merchant_code TEXT;
ALTER TABLE transactions ADD COLUMN bank_code TEXT;

-- Deleting a custom category finds its transactions by this index.
CREATE INDEX transactions_category ON transactions (category) WHERE category IS NOT NULL;

-- A user's own categories, each under one primary category of the taxonomy. The id is shown as
-- `custom:<id>`.
CREATE TABLE custom_categories (
    id UUID PRIMARY KEY,
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    primary_category TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX custom_categories_user ON custom_categories (user_id, id);

-- A user's rules: every condition must hold for the actions to run; rules run in `priority`
-- order (lowest first, then id), and one with `stop_processing` ends the run for that row.
-- Conditions and actions are JSON arrays as the API takes them.
CREATE TABLE rules (
    id UUID PRIMARY KEY,
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    conditions TEXT NOT NULL,
    actions TEXT NOT NULL,
    priority INTEGER NOT NULL,
    stop_processing BOOLEAN NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX rules_user ON rules (user_id, priority, id);
