CREATE TABLE connections (
    id UUID PRIMARY KEY,
    user_id UUID NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    provider_id UUID NOT NULL,
    provider_slug TEXT NOT NULL,
    alias TEXT,
    status TEXT NOT NULL,
    encrypted_credentials BYTEA,
    credentials_key_id TEXT,
    connected_at TIMESTAMPTZ NOT NULL,
    last_sync_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX connections_user ON connections (user_id, provider_slug);

-- Decimals are TEXT (the exact decimal string), never REAL.
CREATE TABLE accounts (
    id UUID PRIMARY KEY,
    connection_id UUID NOT NULL REFERENCES connections (id) ON DELETE CASCADE,
    provider_account_id TEXT NOT NULL,
    account_number_masked TEXT,
    name TEXT NOT NULL,
    account_type TEXT NOT NULL,
    currency TEXT NOT NULL,
    balance_amount TEXT NOT NULL,
    available_balance_amount TEXT,
    is_active BOOLEAN NOT NULL,
    last_synced_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (connection_id, provider_account_id)
);

CREATE TABLE transactions (
    id UUID PRIMARY KEY,
    account_id UUID NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    provider_transaction_id TEXT NOT NULL,
    transaction_type TEXT NOT NULL,
    subtype TEXT,
    status TEXT NOT NULL,
    amount TEXT NOT NULL,
    currency TEXT NOT NULL,
    description TEXT,
    symbol TEXT,
    security_name TEXT,
    quantity TEXT,
    unit_price TEXT,
    commission TEXT,
    transaction_date DATE NOT NULL,
    settlement_date DATE,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (account_id, provider_transaction_id)
);
CREATE INDEX transactions_account_date ON transactions (account_id, transaction_date, id);
CREATE INDEX transactions_account_type_date
    ON transactions (account_id, transaction_type, transaction_date, id);

CREATE TABLE holdings (
    id UUID PRIMARY KEY,
    account_id UUID NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    provider_holding_id TEXT NOT NULL,
    symbol TEXT NOT NULL,
    security_name TEXT,
    asset_type TEXT NOT NULL,
    quantity TEXT NOT NULL,
    cost_basis TEXT,
    market_value TEXT NOT NULL,
    currency TEXT NOT NULL,
    average_price TEXT,
    current_price TEXT,
    unrealized_gain_loss TEXT,
    is_active BOOLEAN NOT NULL,
    last_synced_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (account_id, provider_holding_id)
);
CREATE INDEX holdings_account_active ON holdings (account_id, is_active, symbol);

CREATE TABLE balance_snapshots (
    id UUID PRIMARY KEY,
    account_id UUID NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    balance TEXT NOT NULL,
    available_balance TEXT,
    holdings_value TEXT,
    cash_value TEXT,
    currency TEXT NOT NULL,
    source TEXT NOT NULL,
    captured_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX balance_snapshots_account_time ON balance_snapshots (account_id, captured_at, id);
CREATE INDEX balance_snapshots_account_source_time
    ON balance_snapshots (account_id, source, captured_at, id);
