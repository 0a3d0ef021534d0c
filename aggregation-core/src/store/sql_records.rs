//! The SQL of the financial records (connections, accounts, transactions, holdings, balance
//! snapshots), shared by both backends like [`super::sql`].
//!
//! Decimals are stored as text (their `Decimal` string, never a float) in both databases and
//! compared by value in Rust; every read joins `accounts → connections` to scope rows to the
//! caller.

/// Implements the record store traits for `$store`, a struct with a `pool: sqlx::Pool<$db>`
/// field. `$begin_write` starts a transaction that will write.
macro_rules! impl_records_store {
    ($store:ident, $db:ty, $begin_write:literal) => {
        mod records_sql {
            use super::$store;

            use std::str::FromStr as _;

            use chrono::{DateTime, Utc};
            use rust_decimal::Decimal;
            use sqlx::Row as _;
            use uuid::Uuid;

            use $crate::store::sql::store_error;
            use $crate::store::{
                AccountFilter, AccountRecord, AccountStore, AccountType, AssetType,
                ConnectionRecord, ConnectionStatus, ConnectionStore, FILE_IMPORT_PROVIDER,
                HoldingFilter, HoldingRecord, HoldingStore, ImportAccount, ImportBatch,
                ImportCounts, ImportSnapshot, ImportStore, NewAccount, NewConnection, NewHolding,
                NewSnapshot, NewTransaction, Page, SnapshotRecord, SnapshotSource, SnapshotStore,
                StoreError, SyncAccountData, SyncBatch, SyncCounts, SyncStore,
                TransactionQuery, TransactionRecord, TransactionStatus, TransactionStore,
                TransactionType, UpsertCounts, mask_account_number, provider_id,
            };

            type DbRow = <$db as sqlx::Database>::Row;

            const CONNECTION_COLUMNS: &str = "c.id, c.user_id, c.provider_id, c.provider_slug, \
                 c.alias, c.status, c.encrypted_credentials, c.credentials_key_id, \
                 c.credentials_expires_at, c.connected_at, c.last_sync_at, c.created_at, \
                 c.updated_at";
            /// [`CONNECTION_COLUMNS`] unqualified, for `RETURNING` clauses.
            const CONNECTION_RETURNING: &str = "id, user_id, provider_id, provider_slug, alias, \
                 status, encrypted_credentials, credentials_key_id, credentials_expires_at, \
                 connected_at, last_sync_at, created_at, updated_at";
            const ACCOUNT_COLUMNS: &str = "a.id, a.connection_id, a.provider_account_id, \
                 a.account_number_masked, a.name, a.account_type, a.currency, a.balance_amount, \
                 a.available_balance_amount, a.is_active, a.last_synced_at, a.created_at, \
                 a.updated_at";
            const TRANSACTION_COLUMNS: &str = "t.id, t.account_id, t.provider_transaction_id, \
                 t.transaction_type, t.subtype, t.status, t.amount, t.currency, t.description, \
                 t.symbol, t.security_name, t.quantity, t.unit_price, t.commission, \
                 t.transaction_date, t.settlement_date, t.created_at, t.updated_at";
            const HOLDING_COLUMNS: &str = "h.id, h.account_id, h.provider_holding_id, h.symbol, \
                 h.security_name, h.asset_type, h.quantity, h.cost_basis, h.market_value, \
                 h.currency, h.average_price, h.current_price, h.unrealized_gain_loss, \
                 h.is_active, h.last_synced_at, h.created_at, h.updated_at";
            const SNAPSHOT_COLUMNS: &str = "s.id, s.account_id, s.balance, s.available_balance, \
                 s.holdings_value, s.cash_value, s.currency, s.source, s.captured_at";

            /// Accounts of the user bound to `$1`.
            const USER_ACCOUNTS: &str =
                "accounts a JOIN connections c ON c.id = a.connection_id AND c.user_id = $1";

            fn decode_error(column: &str, message: String) -> sqlx::Error {
                sqlx::Error::ColumnDecode {
                    index: column.to_owned(),
                    source: message.into(),
                }
            }

            fn decimal(row: &DbRow, column: &str) -> Result<Decimal, sqlx::Error> {
                let text: String = row.try_get(column)?;
                Decimal::from_str(&text)
                    .map_err(|error| decode_error(column, format!("{text:?}: {error}")))
            }

            fn optional_decimal(row: &DbRow, column: &str) -> Result<Option<Decimal>, sqlx::Error> {
                let text: Option<String> = row.try_get(column)?;
                text.map(|text| {
                    Decimal::from_str(&text)
                        .map_err(|error| decode_error(column, format!("{text:?}: {error}")))
                })
                .transpose()
            }

            fn choice<T>(
                row: &DbRow,
                column: &str,
                parse: fn(&str) -> Option<T>,
            ) -> Result<T, sqlx::Error> {
                let text: String = row.try_get(column)?;
                parse(&text).ok_or_else(|| decode_error(column, format!("unknown value {text:?}")))
            }

            fn text(value: Decimal) -> String {
                value.to_string()
            }

            fn optional_text(value: Option<Decimal>) -> Option<String> {
                value.map(text)
            }

            fn currency(code: &str) -> String {
                code.trim().to_ascii_uppercase()
            }

            fn count(total: i64) -> u64 {
                u64::try_from(total).unwrap_or(0)
            }

            fn connection_from_row(row: &DbRow) -> Result<ConnectionRecord, sqlx::Error> {
                Ok(ConnectionRecord {
                    id: row.try_get("id")?,
                    user_id: row.try_get("user_id")?,
                    provider_id: row.try_get("provider_id")?,
                    provider_slug: row.try_get("provider_slug")?,
                    alias: row.try_get("alias")?,
                    status: choice(row, "status", ConnectionStatus::parse)?,
                    encrypted_credentials: row.try_get("encrypted_credentials")?,
                    credentials_key_id: row.try_get("credentials_key_id")?,
                    credentials_expires_at: row.try_get("credentials_expires_at")?,
                    connected_at: row.try_get("connected_at")?,
                    last_sync_at: row.try_get("last_sync_at")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                })
            }

            fn account_from_row(row: &DbRow) -> Result<AccountRecord, sqlx::Error> {
                Ok(AccountRecord {
                    id: row.try_get("id")?,
                    connection_id: row.try_get("connection_id")?,
                    provider_account_id: row.try_get("provider_account_id")?,
                    account_number_masked: row.try_get("account_number_masked")?,
                    name: row.try_get("name")?,
                    account_type: choice(row, "account_type", AccountType::parse)?,
                    currency: row.try_get("currency")?,
                    balance_amount: decimal(row, "balance_amount")?,
                    available_balance_amount: optional_decimal(row, "available_balance_amount")?,
                    is_active: row.try_get("is_active")?,
                    last_synced_at: row.try_get("last_synced_at")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                })
            }

            fn transaction_from_row(row: &DbRow) -> Result<TransactionRecord, sqlx::Error> {
                Ok(TransactionRecord {
                    id: row.try_get("id")?,
                    account_id: row.try_get("account_id")?,
                    provider_transaction_id: row.try_get("provider_transaction_id")?,
                    transaction_type: choice(row, "transaction_type", TransactionType::parse)?,
                    subtype: row.try_get("subtype")?,
                    status: choice(row, "status", TransactionStatus::parse)?,
                    amount: decimal(row, "amount")?,
                    currency: row.try_get("currency")?,
                    description: row.try_get("description")?,
                    symbol: row.try_get("symbol")?,
                    security_name: row.try_get("security_name")?,
                    quantity: optional_decimal(row, "quantity")?,
                    unit_price: optional_decimal(row, "unit_price")?,
                    commission: optional_decimal(row, "commission")?,
                    transaction_date: row.try_get("transaction_date")?,
                    settlement_date: row.try_get("settlement_date")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                })
            }

            fn holding_from_row(row: &DbRow) -> Result<HoldingRecord, sqlx::Error> {
                Ok(HoldingRecord {
                    id: row.try_get("id")?,
                    account_id: row.try_get("account_id")?,
                    provider_holding_id: row.try_get("provider_holding_id")?,
                    symbol: row.try_get("symbol")?,
                    security_name: row.try_get("security_name")?,
                    asset_type: choice(row, "asset_type", AssetType::parse)?,
                    quantity: decimal(row, "quantity")?,
                    cost_basis: optional_decimal(row, "cost_basis")?,
                    market_value: decimal(row, "market_value")?,
                    currency: row.try_get("currency")?,
                    average_price: optional_decimal(row, "average_price")?,
                    current_price: optional_decimal(row, "current_price")?,
                    unrealized_gain_loss: optional_decimal(row, "unrealized_gain_loss")?,
                    is_active: row.try_get("is_active")?,
                    last_synced_at: row.try_get("last_synced_at")?,
                    created_at: row.try_get("created_at")?,
                    updated_at: row.try_get("updated_at")?,
                })
            }

            fn snapshot_from_row(row: &DbRow) -> Result<SnapshotRecord, sqlx::Error> {
                Ok(SnapshotRecord {
                    id: row.try_get("id")?,
                    account_id: row.try_get("account_id")?,
                    balance: decimal(row, "balance")?,
                    available_balance: optional_decimal(row, "available_balance")?,
                    holdings_value: optional_decimal(row, "holdings_value")?,
                    cash_value: optional_decimal(row, "cash_value")?,
                    currency: row.try_get("currency")?,
                    source: choice(row, "source", SnapshotSource::parse)?,
                    captured_at: row.try_get("captured_at")?,
                })
            }

            fn rows_to<T>(
                rows: &[DbRow],
                from_row: fn(&DbRow) -> Result<T, sqlx::Error>,
            ) -> Result<Vec<T>, StoreError> {
                rows.iter().map(from_row).collect::<Result<_, _>>().map_err(store_error)
            }

            async fn insert_connection(
                tx: &mut sqlx::Transaction<'static, $db>,
                connection: &NewConnection,
            ) -> Result<ConnectionRecord, sqlx::Error> {
                let provider = provider_id(&connection.provider_slug);
                sqlx::query(
                    "INSERT INTO connections (id, user_id, provider_id, provider_slug, alias, \
                     status, encrypted_credentials, credentials_key_id, \
                     credentials_expires_at, connected_at, last_sync_at, created_at, \
                     updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, $10, $10)",
                )
                .bind(connection.id)
                .bind(connection.user_id)
                .bind(provider)
                .bind(&connection.provider_slug)
                .bind(connection.alias.as_deref())
                .bind(connection.status.as_str())
                .bind(connection.encrypted_credentials.as_deref())
                .bind(connection.credentials_key_id.as_deref())
                .bind(connection.credentials_expires_at)
                .bind(connection.created_at)
                .execute(&mut **tx)
                .await?;
                Ok(ConnectionRecord {
                    id: connection.id,
                    user_id: connection.user_id,
                    provider_id: provider,
                    provider_slug: connection.provider_slug.clone(),
                    alias: connection.alias.clone(),
                    status: connection.status,
                    encrypted_credentials: connection.encrypted_credentials.clone(),
                    credentials_key_id: connection.credentials_key_id.clone(),
                    credentials_expires_at: connection.credentials_expires_at,
                    connected_at: connection.created_at,
                    last_sync_at: None,
                    created_at: connection.created_at,
                    updated_at: connection.created_at,
                })
            }

            /// What an upsert did to one row.
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            enum Upserted {
                Created,
                Updated,
                Unchanged,
            }

            fn tally(counts: &mut UpsertCounts, (id, outcome): (Uuid, Upserted)) {
                match outcome {
                    Upserted::Created => counts.created += 1,
                    Upserted::Updated => counts.updated += 1,
                    Upserted::Unchanged => counts.unchanged += 1,
                }
                counts.ids.push(id);
            }

            /// Adds newly inserted transactions to the account's stored count (same transaction
            /// as the inserts, so the count never drifts).
            async fn add_to_transaction_count(
                tx: &mut sqlx::Transaction<'static, $db>,
                account_id: Uuid,
                created: u64,
            ) -> Result<(), StoreError> {
                if created == 0 {
                    return Ok(());
                }
                sqlx::query(
                    "UPDATE accounts SET transaction_count = transaction_count + $2 WHERE id = $1",
                )
                .bind(account_id)
                .bind(i64::try_from(created).unwrap_or(i64::MAX))
                .execute(&mut **tx)
                .await
                .map_err(store_error)?;
                Ok(())
            }

            /// The user's connection with this slug and alias that is not disconnected, created
            /// (active, no credentials) when there is none.
            async fn find_or_create_connection_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                user_id: Uuid,
                provider_slug: &str,
                alias: Option<&str>,
                now: DateTime<Utc>,
            ) -> Result<ConnectionRecord, StoreError> {
                lock_user_in(tx, user_id).await?;
                let existing = live_connection_in(tx, user_id, provider_slug, alias).await?;
                if let Some(existing) = existing {
                    return Ok(existing);
                }
                insert_connection(
                    tx,
                    &NewConnection {
                        id: Uuid::now_v7(),
                        user_id,
                        provider_slug: provider_slug.to_owned(),
                        alias: alias.map(str::to_owned),
                        status: ConnectionStatus::Active,
                        encrypted_credentials: None,
                        credentials_key_id: None,
                        credentials_expires_at: None,
                        created_at: now,
                    },
                )
                .await
                .map_err(store_error)
            }

            /// Locks the user's row for the rest of the transaction (PostgreSQL) so concurrent
            /// transactions looking up or creating the user's connections see one another's;
            /// SQLite's `BEGIN IMMEDIATE` already serializes writers. [`StoreError::Other`]
            /// when the user does not exist.
            async fn lock_user_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                user_id: Uuid,
            ) -> Result<(), StoreError> {
                let locked = sqlx::query("UPDATE users SET updated_at = updated_at WHERE id = $1")
                    .bind(user_id)
                    .execute(&mut **tx)
                    .await
                    .map_err(store_error)?;
                if locked.rows_affected() == 0 {
                    return Err(StoreError::Other(format!("unknown user {user_id}")));
                }
                Ok(())
            }

            /// The user's oldest connection with this slug and alias (compared exactly, `None`
            /// matching `None`) that is not disconnected.
            async fn live_connection_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                user_id: Uuid,
                provider_slug: &str,
                alias: Option<&str>,
            ) -> Result<Option<ConnectionRecord>, StoreError> {
                let alias_filter = if alias.is_some() {
                    "c.alias = $3"
                } else {
                    "c.alias IS NULL"
                };
                let sql = format!(
                    "SELECT {CONNECTION_COLUMNS} FROM connections c \
                     WHERE c.user_id = $1 AND c.provider_slug = $2 AND {alias_filter} \
                     AND c.status <> 'disconnected' ORDER BY c.created_at, c.id LIMIT 1"
                );
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(user_id)
                    .bind(provider_slug);
                if let Some(alias) = alias {
                    query = query.bind(alias);
                }
                let existing = query.fetch_optional(&mut **tx).await.map_err(store_error)?;
                existing
                    .as_ref()
                    .map(connection_from_row)
                    .transpose()
                    .map_err(store_error)
            }

            async fn upsert_account_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                connection_id: Uuid,
                account: &NewAccount,
                now: DateTime<Utc>,
            ) -> Result<(Uuid, Upserted), StoreError> {
                let masked = account
                    .account_number
                    .as_deref()
                    .map(str::trim)
                    .filter(|number| !number.is_empty())
                    .map(mask_account_number);
                let currency = currency(&account.currency);
                let id = Uuid::now_v7();
                let inserted = sqlx::query(
                    "INSERT INTO accounts (id, connection_id, provider_account_id, \
                     account_number_masked, name, account_type, currency, balance_amount, \
                     available_balance_amount, is_active, last_synced_at, created_at, \
                     updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $11) \
                     ON CONFLICT (connection_id, provider_account_id) DO NOTHING",
                )
                .bind(id)
                .bind(connection_id)
                .bind(&account.provider_account_id)
                .bind(masked.as_deref())
                .bind(&account.name)
                .bind(account.account_type.as_str())
                .bind(&currency)
                .bind(text(account.balance_amount))
                .bind(optional_text(account.available_balance_amount))
                .bind(account.is_active)
                .bind(now)
                .execute(&mut **tx)
                .await
                .map_err(store_error)?;
                if inserted.rows_affected() == 1 {
                    return Ok((id, Upserted::Created));
                }
                let sql = format!(
                    "SELECT {ACCOUNT_COLUMNS} FROM accounts a \
                     WHERE a.connection_id = $1 AND a.provider_account_id = $2"
                );
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(connection_id)
                    .bind(&account.provider_account_id)
                    .fetch_one(&mut **tx)
                    .await
                    .map_err(store_error)?;
                let existing = account_from_row(&row).map_err(store_error)?;
                let same = existing.account_number_masked == masked
                    && existing.name == account.name
                    && existing.account_type == account.account_type
                    && existing.currency == currency
                    && existing.balance_amount == account.balance_amount
                    && existing.available_balance_amount
                        == account.available_balance_amount
                    && existing.is_active == account.is_active;
                let outcome = if same {
                    sqlx::query("UPDATE accounts SET last_synced_at = $2 WHERE id = $1")
                        .bind(existing.id)
                        .bind(now)
                        .execute(&mut **tx)
                        .await
                        .map_err(store_error)?;
                    Upserted::Unchanged
                } else {
                    sqlx::query(
                        "UPDATE accounts SET account_number_masked = $2, name = $3, \
                         account_type = $4, currency = $5, balance_amount = $6, \
                         available_balance_amount = $7, is_active = $8, \
                         last_synced_at = $9, updated_at = $9 WHERE id = $1",
                    )
                    .bind(existing.id)
                    .bind(masked.as_deref())
                    .bind(&account.name)
                    .bind(account.account_type.as_str())
                    .bind(&currency)
                    .bind(text(account.balance_amount))
                    .bind(optional_text(account.available_balance_amount))
                    .bind(account.is_active)
                    .bind(now)
                    .execute(&mut **tx)
                    .await
                    .map_err(store_error)?;
                    Upserted::Updated
                };
                Ok((existing.id, outcome))
            }

            async fn upsert_transaction_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                account_id: Uuid,
                item: &NewTransaction,
                now: DateTime<Utc>,
            ) -> Result<(Uuid, Upserted), StoreError> {
                let currency = currency(&item.currency);
                let id = Uuid::now_v7();
                let inserted = sqlx::query(
                    "INSERT INTO transactions (id, account_id, provider_transaction_id, \
                     transaction_type, subtype, status, amount, currency, description, \
                     symbol, security_name, quantity, unit_price, commission, \
                     transaction_date, settlement_date, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
                     $14, $15, $16, $17, $17) \
                     ON CONFLICT (account_id, provider_transaction_id) DO NOTHING",
                )
                .bind(id)
                .bind(account_id)
                .bind(&item.provider_transaction_id)
                .bind(item.transaction_type.as_str())
                .bind(item.subtype.as_deref())
                .bind(item.status.as_str())
                .bind(text(item.amount))
                .bind(&currency)
                .bind(item.description.as_deref())
                .bind(item.symbol.as_deref())
                .bind(item.security_name.as_deref())
                .bind(optional_text(item.quantity))
                .bind(optional_text(item.unit_price))
                .bind(optional_text(item.commission))
                .bind(item.transaction_date)
                .bind(item.settlement_date)
                .bind(now)
                .execute(&mut **tx)
                .await
                .map_err(store_error)?;
                if inserted.rows_affected() == 1 {
                    return Ok((id, Upserted::Created));
                }
                let sql = format!(
                    "SELECT {TRANSACTION_COLUMNS} FROM transactions t \
                     WHERE t.account_id = $1 AND t.provider_transaction_id = $2"
                );
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(account_id)
                    .bind(&item.provider_transaction_id)
                    .fetch_one(&mut **tx)
                    .await
                    .map_err(store_error)?;
                let existing = transaction_from_row(&row).map_err(store_error)?;
                if transaction_matches(&existing, item) {
                    return Ok((existing.id, Upserted::Unchanged));
                }
                update_transaction(tx, existing.id, item, now).await?;
                Ok((existing.id, Upserted::Updated))
            }

            /// Rows per multi-row statement: 18 parameters a row stays below SQLite's 32,766
            /// and PostgreSQL's 65,535 bound parameters.
            const TRANSACTION_CHUNK: usize = 1_000;

            /// Upserts a batch of the account's transactions with one multi-row insert per
            /// chunk and one look-up of the rows that already existed, instead of a round trip
            /// per row. Same outcomes, in input order, as [`upsert_transaction_in`] row by row.
            async fn upsert_transactions_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                account_id: Uuid,
                items: &[NewTransaction],
                now: DateTime<Utc>,
            ) -> Result<Vec<(Uuid, Upserted)>, StoreError> {
                let mut outcomes = Vec::with_capacity(items.len());
                for chunk in items.chunks(TRANSACTION_CHUNK) {
                    let mut seen = std::collections::HashSet::with_capacity(chunk.len());
                    let repeats = !chunk
                        .iter()
                        .all(|item| seen.insert(item.provider_transaction_id.as_str()));
                    if repeats {
                        // A provider id twice in one chunk: row by row keeps "later wins".
                        for item in chunk {
                            outcomes.push(upsert_transaction_in(tx, account_id, item, now).await?);
                        }
                        continue;
                    }
                    outcomes.extend(insert_transaction_chunk(tx, account_id, chunk, now).await?);
                }
                Ok(outcomes)
            }

            /// The `index`-th bind parameter of a long generated statement. SQLite looks up
            /// numbered parameters (`$n`) by name with a linear scan, which makes binding
            /// thousands of them quadratic; its anonymous `?` binds in order at no such cost.
            fn placeholder(index: usize) -> String {
                if <$db as sqlx::Database>::NAME == "SQLite" {
                    "?".to_owned()
                } else {
                    format!("${index}")
                }
            }

            async fn insert_transaction_chunk(
                tx: &mut sqlx::Transaction<'static, $db>,
                account_id: Uuid,
                chunk: &[NewTransaction],
                now: DateTime<Utc>,
            ) -> Result<Vec<(Uuid, Upserted)>, StoreError> {
                const COLUMNS: usize = 18;
                let mut sql = String::from(
                    "INSERT INTO transactions (id, account_id, provider_transaction_id, \
                     transaction_type, subtype, status, amount, currency, description, \
                     symbol, security_name, quantity, unit_price, commission, \
                     transaction_date, settlement_date, created_at, updated_at) VALUES ",
                );
                for row in 0..chunk.len() {
                    let base = row * COLUMNS;
                    if row > 0 {
                        sql.push_str(", ");
                    }
                    let values: Vec<String> =
                        (1..=COLUMNS).map(|column| placeholder(base + column)).collect();
                    sql.push('(');
                    sql.push_str(&values.join(", "));
                    sql.push(')');
                }
                sql.push_str(
                    " ON CONFLICT (account_id, provider_transaction_id) DO NOTHING \
                     RETURNING provider_transaction_id",
                );
                let ids: Vec<Uuid> = chunk.iter().map(|_| Uuid::now_v7()).collect();
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                for (item, id) in chunk.iter().zip(&ids) {
                    query = query
                        .bind(*id)
                        .bind(account_id)
                        .bind(item.provider_transaction_id.as_str())
                        .bind(item.transaction_type.as_str())
                        .bind(item.subtype.as_deref())
                        .bind(item.status.as_str())
                        .bind(text(item.amount))
                        .bind(currency(&item.currency))
                        .bind(item.description.as_deref())
                        .bind(item.symbol.as_deref())
                        .bind(item.security_name.as_deref())
                        .bind(optional_text(item.quantity))
                        .bind(optional_text(item.unit_price))
                        .bind(optional_text(item.commission))
                        .bind(item.transaction_date)
                        .bind(item.settlement_date)
                        .bind(now)
                        .bind(now);
                }
                let inserted_rows = query.fetch_all(&mut **tx).await.map_err(store_error)?;
                let mut inserted = std::collections::HashSet::with_capacity(inserted_rows.len());
                for row in &inserted_rows {
                    let provider_id: String =
                        row.try_get("provider_transaction_id").map_err(store_error)?;
                    inserted.insert(provider_id);
                }
                let existing_ids: Vec<&str> = chunk
                    .iter()
                    .map(|item| item.provider_transaction_id.as_str())
                    .filter(|provider_id| !inserted.contains(*provider_id))
                    .collect();
                let mut existing = std::collections::HashMap::with_capacity(existing_ids.len());
                if !existing_ids.is_empty() {
                    let placeholders = (0..existing_ids.len())
                        .map(|index| placeholder(index + 2))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let account = placeholder(1);
                    let sql = format!(
                        "SELECT {TRANSACTION_COLUMNS} FROM transactions t WHERE \
                         t.account_id = {account} AND t.provider_transaction_id IN ({placeholders})"
                    );
                    let mut lookup = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(account_id);
                    for provider_id in &existing_ids {
                        lookup = lookup.bind(*provider_id);
                    }
                    for row in lookup.fetch_all(&mut **tx).await.map_err(store_error)? {
                        let record = transaction_from_row(&row).map_err(store_error)?;
                        existing.insert(record.provider_transaction_id.clone(), record);
                    }
                }
                let mut outcomes = Vec::with_capacity(chunk.len());
                for (item, id) in chunk.iter().zip(ids) {
                    if inserted.contains(&item.provider_transaction_id) {
                        outcomes.push((id, Upserted::Created));
                        continue;
                    }
                    let Some(stored) = existing.get(&item.provider_transaction_id) else {
                        // Neither inserted nor found: another writer removed it meanwhile;
                        // the row-by-row path settles it.
                        outcomes.push(upsert_transaction_in(tx, account_id, item, now).await?);
                        continue;
                    };
                    if transaction_matches(stored, item) {
                        outcomes.push((stored.id, Upserted::Unchanged));
                    } else {
                        update_transaction(tx, stored.id, item, now).await?;
                        outcomes.push((stored.id, Upserted::Updated));
                    }
                }
                Ok(outcomes)
            }

            /// Whether a stored transaction already holds every field of `item`.
            fn transaction_matches(existing: &TransactionRecord, item: &NewTransaction) -> bool {
                existing.transaction_type == item.transaction_type
                    && existing.subtype == item.subtype
                    && existing.status == item.status
                    && existing.amount == item.amount
                    && existing.currency == currency(&item.currency)
                    && existing.description == item.description
                    && existing.symbol == item.symbol
                    && existing.security_name == item.security_name
                    && existing.quantity == item.quantity
                    && existing.unit_price == item.unit_price
                    && existing.commission == item.commission
                    && existing.transaction_date == item.transaction_date
                    && existing.settlement_date == item.settlement_date
            }

            async fn update_transaction(
                tx: &mut sqlx::Transaction<'static, $db>,
                id: Uuid,
                item: &NewTransaction,
                now: DateTime<Utc>,
            ) -> Result<(), StoreError> {
                sqlx::query(
                    "UPDATE transactions SET transaction_type = $2, subtype = $3, \
                     status = $4, amount = $5, currency = $6, description = $7, \
                     symbol = $8, security_name = $9, quantity = $10, \
                     unit_price = $11, commission = $12, transaction_date = $13, \
                     settlement_date = $14, updated_at = $15 WHERE id = $1",
                )
                .bind(id)
                .bind(item.transaction_type.as_str())
                .bind(item.subtype.as_deref())
                .bind(item.status.as_str())
                .bind(text(item.amount))
                .bind(currency(&item.currency))
                .bind(item.description.as_deref())
                .bind(item.symbol.as_deref())
                .bind(item.security_name.as_deref())
                .bind(optional_text(item.quantity))
                .bind(optional_text(item.unit_price))
                .bind(optional_text(item.commission))
                .bind(item.transaction_date)
                .bind(item.settlement_date)
                .bind(now)
                .execute(&mut **tx)
                .await
                .map_err(store_error)?;
                Ok(())
            }

            async fn upsert_holding_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                account_id: Uuid,
                item: &NewHolding,
                now: DateTime<Utc>,
            ) -> Result<(Uuid, Upserted), StoreError> {
                let currency = currency(&item.currency);
                let id = Uuid::now_v7();
                let inserted = sqlx::query(
                    "INSERT INTO holdings (id, account_id, provider_holding_id, symbol, \
                     security_name, asset_type, quantity, cost_basis, market_value, \
                     currency, average_price, current_price, unrealized_gain_loss, \
                     is_active, last_synced_at, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
                     $14, $15, $15, $15) \
                     ON CONFLICT (account_id, provider_holding_id) DO NOTHING",
                )
                .bind(id)
                .bind(account_id)
                .bind(&item.provider_holding_id)
                .bind(&item.symbol)
                .bind(item.security_name.as_deref())
                .bind(item.asset_type.as_str())
                .bind(text(item.quantity))
                .bind(optional_text(item.cost_basis))
                .bind(text(item.market_value))
                .bind(&currency)
                .bind(optional_text(item.average_price))
                .bind(optional_text(item.current_price))
                .bind(optional_text(item.unrealized_gain_loss))
                .bind(true)
                .bind(now)
                .execute(&mut **tx)
                .await
                .map_err(store_error)?;
                if inserted.rows_affected() == 1 {
                    return Ok((id, Upserted::Created));
                }
                let sql = format!(
                    "SELECT {HOLDING_COLUMNS} FROM holdings h \
                     WHERE h.account_id = $1 AND h.provider_holding_id = $2"
                );
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(account_id)
                    .bind(&item.provider_holding_id)
                    .fetch_one(&mut **tx)
                    .await
                    .map_err(store_error)?;
                let existing = holding_from_row(&row).map_err(store_error)?;
                let same = existing.symbol == item.symbol
                    && existing.security_name == item.security_name
                    && existing.asset_type == item.asset_type
                    && existing.quantity == item.quantity
                    && existing.cost_basis == item.cost_basis
                    && existing.market_value == item.market_value
                    && existing.currency == currency
                    && existing.average_price == item.average_price
                    && existing.current_price == item.current_price
                    && existing.unrealized_gain_loss == item.unrealized_gain_loss
                    && existing.is_active;
                let outcome = if same {
                    sqlx::query("UPDATE holdings SET last_synced_at = $2 WHERE id = $1")
                        .bind(existing.id)
                        .bind(now)
                        .execute(&mut **tx)
                        .await
                        .map_err(store_error)?;
                    Upserted::Unchanged
                } else {
                    sqlx::query(
                        "UPDATE holdings SET symbol = $2, security_name = $3, \
                         asset_type = $4, quantity = $5, cost_basis = $6, \
                         market_value = $7, currency = $8, average_price = $9, \
                         current_price = $10, unrealized_gain_loss = $11, \
                         is_active = $12, last_synced_at = $13, updated_at = $13 \
                         WHERE id = $1",
                    )
                    .bind(existing.id)
                    .bind(&item.symbol)
                    .bind(item.security_name.as_deref())
                    .bind(item.asset_type.as_str())
                    .bind(text(item.quantity))
                    .bind(optional_text(item.cost_basis))
                    .bind(text(item.market_value))
                    .bind(&currency)
                    .bind(optional_text(item.average_price))
                    .bind(optional_text(item.current_price))
                    .bind(optional_text(item.unrealized_gain_loss))
                    .bind(true)
                    .bind(now)
                    .execute(&mut **tx)
                    .await
                    .map_err(store_error)?;
                    Upserted::Updated
                };
                Ok((existing.id, outcome))
            }

            /// Marks inactive every active holding of the account whose provider id is not in
            /// `keep_provider_ids` (all of them when it is empty), in one statement; the number
            /// deactivated.
            async fn deactivate_missing_holdings_in<'c, E>(
                executor: E,
                account_id: Uuid,
                keep_provider_ids: &[String],
                now: DateTime<Utc>,
            ) -> Result<u64, StoreError>
            where
                E: sqlx::Executor<'c, Database = $db>,
            {
                let mut sql = format!(
                    "UPDATE holdings SET is_active = {}, updated_at = {} \
                     WHERE account_id = {} AND is_active = {}",
                    placeholder(1),
                    placeholder(2),
                    placeholder(3),
                    placeholder(4),
                );
                if !keep_provider_ids.is_empty() {
                    let placeholders = (0..keep_provider_ids.len())
                        .map(|index| placeholder(index + 5))
                        .collect::<Vec<_>>()
                        .join(", ");
                    sql.push_str(&format!(" AND provider_holding_id NOT IN ({placeholders})"));
                }
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(false)
                    .bind(now)
                    .bind(account_id)
                    .bind(true);
                for keep in keep_provider_ids {
                    query = query.bind(keep.as_str());
                }
                let done = query.execute(executor).await.map_err(store_error)?;
                Ok(done.rows_affected())
            }

            async fn insert_snapshot_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                snapshot: &NewSnapshot,
            ) -> Result<SnapshotRecord, StoreError> {
                let record = SnapshotRecord {
                    id: Uuid::now_v7(),
                    account_id: snapshot.account_id,
                    balance: snapshot.balance,
                    available_balance: snapshot.available_balance,
                    holdings_value: snapshot.holdings_value,
                    cash_value: snapshot.cash_value,
                    currency: currency(&snapshot.currency),
                    source: snapshot.source,
                    captured_at: snapshot.captured_at,
                };
                sqlx::query(
                    "INSERT INTO balance_snapshots (id, account_id, balance, \
                     available_balance, holdings_value, cash_value, currency, source, \
                     captured_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(record.id)
                .bind(record.account_id)
                .bind(text(record.balance))
                .bind(optional_text(record.available_balance))
                .bind(optional_text(record.holdings_value))
                .bind(optional_text(record.cash_value))
                .bind(&record.currency)
                .bind(record.source.as_str())
                .bind(record.captured_at)
                .execute(&mut **tx)
                .await
                .map_err(store_error)?;
                Ok(record)
            }

            #[async_trait::async_trait]
            impl ConnectionStore for $store {
                async fn create_connection(
                    &self,
                    connection: &NewConnection,
                ) -> Result<ConnectionRecord, StoreError> {
                    let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                    let record = insert_connection(&mut tx, connection)
                        .await
                        .map_err(store_error)?;
                    tx.commit().await.map_err(store_error)?;
                    Ok(record)
                }

                async fn find_or_create_connection(
                    &self,
                    user_id: Uuid,
                    provider_slug: &str,
                    alias: Option<&str>,
                    now: DateTime<Utc>,
                ) -> Result<ConnectionRecord, StoreError> {
                    let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                    let record =
                        find_or_create_connection_in(&mut tx, user_id, provider_slug, alias, now)
                            .await?;
                    tx.commit().await.map_err(store_error)?;
                    Ok(record)
                }

                async fn connection_for_user(
                    &self,
                    user_id: Uuid,
                    connection_id: Uuid,
                ) -> Result<Option<ConnectionRecord>, StoreError> {
                    let sql = format!(
                        "SELECT {CONNECTION_COLUMNS} FROM connections c \
                         WHERE c.id = $1 AND c.user_id = $2"
                    );
                    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .bind(connection_id)
                        .bind(user_id)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(store_error)?;
                    row.as_ref()
                        .map(connection_from_row)
                        .transpose()
                        .map_err(store_error)
                }
            }

            #[async_trait::async_trait]
            impl AccountStore for $store {
                async fn upsert_accounts(
                    &self,
                    connection_id: Uuid,
                    accounts: &[NewAccount],
                    now: DateTime<Utc>,
                ) -> Result<UpsertCounts, StoreError> {
                    let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                    let mut counts = UpsertCounts::default();
                    for account in accounts {
                        let done = upsert_account_in(&mut tx, connection_id, account, now).await?;
                        tally(&mut counts, done);
                    }
                    tx.commit().await.map_err(store_error)?;
                    Ok(counts)
                }

                async fn account_for_user(
                    &self,
                    user_id: Uuid,
                    account_id: Uuid,
                ) -> Result<Option<AccountRecord>, StoreError> {
                    let sql = format!(
                        "SELECT {ACCOUNT_COLUMNS} FROM {USER_ACCOUNTS} WHERE a.id = $2"
                    );
                    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .bind(user_id)
                        .bind(account_id)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(store_error)?;
                    row.as_ref()
                        .map(account_from_row)
                        .transpose()
                        .map_err(store_error)
                }

                async fn accounts_for_user(
                    &self,
                    user_id: Uuid,
                    filter: &AccountFilter,
                ) -> Result<Vec<AccountRecord>, StoreError> {
                    let mut sql =
                        format!("SELECT {ACCOUNT_COLUMNS} FROM {USER_ACCOUNTS} WHERE 1 = 1");
                    let mut next = 1;
                    let mut placeholder = || {
                        next += 1;
                        next
                    };
                    if filter.connection_id.is_some() {
                        sql.push_str(&format!(" AND a.connection_id = ${}", placeholder()));
                    }
                    if filter.active_only {
                        sql.push_str(&format!(" AND a.is_active = ${}", placeholder()));
                    }
                    if filter.account_type.is_some() {
                        sql.push_str(&format!(" AND a.account_type = ${}", placeholder()));
                    }
                    sql.push_str(" ORDER BY a.name, a.id");
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(user_id);
                    if let Some(connection_id) = filter.connection_id {
                        query = query.bind(connection_id);
                    }
                    if filter.active_only {
                        query = query.bind(true);
                    }
                    if let Some(account_type) = filter.account_type {
                        query = query.bind(account_type.as_str());
                    }
                    let rows = query.fetch_all(&self.pool).await.map_err(store_error)?;
                    rows_to(&rows, account_from_row)
                }
            }

            #[async_trait::async_trait]
            impl TransactionStore for $store {
                async fn upsert_transactions(
                    &self,
                    account_id: Uuid,
                    transactions: &[NewTransaction],
                    now: DateTime<Utc>,
                ) -> Result<UpsertCounts, StoreError> {
                    let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                    let mut counts = UpsertCounts::default();
                    for done in upsert_transactions_in(&mut tx, account_id, transactions, now).await? {
                        tally(&mut counts, done);
                    }
                    add_to_transaction_count(&mut tx, account_id, counts.created).await?;
                    tx.commit().await.map_err(store_error)?;
                    Ok(counts)
                }

                async fn transaction_for_user(
                    &self,
                    user_id: Uuid,
                    transaction_id: Uuid,
                ) -> Result<Option<TransactionRecord>, StoreError> {
                    let sql = format!(
                        "SELECT {TRANSACTION_COLUMNS} FROM {USER_ACCOUNTS} \
                         JOIN transactions t ON t.account_id = a.id WHERE t.id = $2"
                    );
                    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .bind(user_id)
                        .bind(transaction_id)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(store_error)?;
                    row.as_ref()
                        .map(transaction_from_row)
                        .transpose()
                        .map_err(store_error)
                }

                async fn transactions_for_account(
                    &self,
                    user_id: Uuid,
                    account_id: Uuid,
                    query: &TransactionQuery,
                ) -> Result<Page<TransactionRecord>, StoreError> {
                    let scope = format!(
                        "FROM {USER_ACCOUNTS} JOIN transactions t ON t.account_id = a.id \
                         WHERE a.id = $2"
                    );
                    match *query {
                        TransactionQuery::Recent {
                            transaction_type,
                            limit,
                            offset,
                        } => {
                            let (filter, paging) = if transaction_type.is_some() {
                                (" AND t.transaction_type = $3", "LIMIT $4 OFFSET $5")
                            } else {
                                ("", "LIMIT $3 OFFSET $4")
                            };
                            // Without a filter the count is the one kept on the account.
                            let count_sql = if transaction_type.is_some() {
                                format!("SELECT COUNT(*) {scope}{filter}")
                            } else {
                                format!(
                                    "SELECT a.transaction_count FROM {USER_ACCOUNTS} \
                                     WHERE a.id = $2"
                                )
                            };
                            let list_sql = format!(
                                "SELECT {TRANSACTION_COLUMNS} {scope}{filter} \
                                 ORDER BY t.transaction_date DESC, t.id DESC {paging}"
                            );
                            let mut counter = sqlx::query_scalar::<_, i64>(
                                sqlx::AssertSqlSafe(count_sql),
                            )
                            .bind(user_id)
                            .bind(account_id);
                            let mut lister = sqlx::query(sqlx::AssertSqlSafe(list_sql))
                                .bind(user_id)
                                .bind(account_id);
                            if let Some(transaction_type) = transaction_type {
                                counter = counter.bind(transaction_type.as_str());
                                lister = lister.bind(transaction_type.as_str());
                            }
                            // No row: not the user's account, so nothing to count.
                            let total = counter
                                .fetch_optional(&self.pool)
                                .await
                                .map_err(store_error)?
                                .unwrap_or(0);
                            let rows = lister
                                .bind(i64::from(limit))
                                .bind(i64::try_from(offset).unwrap_or(i64::MAX))
                                .fetch_all(&self.pool)
                                .await
                                .map_err(store_error)?;
                            Ok(Page {
                                items: rows_to(&rows, transaction_from_row)?,
                                total_count: count(total),
                            })
                        }
                        TransactionQuery::DateRange { start, end } => {
                            let filter =
                                " AND t.transaction_date >= $3 AND t.transaction_date <= $4";
                            let list_sql = format!(
                                "SELECT {TRANSACTION_COLUMNS} {scope}{filter} \
                                 ORDER BY t.transaction_date, t.id"
                            );
                            let rows = sqlx::query(sqlx::AssertSqlSafe(list_sql))
                                .bind(user_id)
                                .bind(account_id)
                                .bind(start)
                                .bind(end)
                                .fetch_all(&self.pool)
                                .await
                                .map_err(store_error)?;
                            let items = rows_to(&rows, transaction_from_row)?;
                            // Not paged: every matching row is in the page.
                            let total_count = items.len() as u64;
                            Ok(Page { items, total_count })
                        }
                    }
                }
            }

            #[async_trait::async_trait]
            impl HoldingStore for $store {
                async fn upsert_holdings(
                    &self,
                    account_id: Uuid,
                    holdings: &[NewHolding],
                    now: DateTime<Utc>,
                ) -> Result<UpsertCounts, StoreError> {
                    let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                    let mut counts = UpsertCounts::default();
                    for item in holdings {
                        let done = upsert_holding_in(&mut tx, account_id, item, now).await?;
                        tally(&mut counts, done);
                    }
                    tx.commit().await.map_err(store_error)?;
                    Ok(counts)
                }

                async fn deactivate_missing_holdings(
                    &self,
                    account_id: Uuid,
                    keep_provider_ids: &[String],
                    now: DateTime<Utc>,
                ) -> Result<u64, StoreError> {
                    deactivate_missing_holdings_in(&self.pool, account_id, keep_provider_ids, now)
                        .await
                }

                async fn holdings_for_user(
                    &self,
                    user_id: Uuid,
                    filter: &HoldingFilter,
                ) -> Result<Vec<HoldingRecord>, StoreError> {
                    let mut sql = format!(
                        "SELECT {HOLDING_COLUMNS} FROM {USER_ACCOUNTS} \
                         JOIN holdings h ON h.account_id = a.id WHERE 1 = 1"
                    );
                    let mut next = 1;
                    let mut placeholder = || {
                        next += 1;
                        next
                    };
                    if filter.account_id.is_some() {
                        sql.push_str(&format!(" AND a.id = ${}", placeholder()));
                    }
                    if filter.active_only {
                        sql.push_str(&format!(" AND h.is_active = ${}", placeholder()));
                    }
                    if filter.asset_type.is_some() {
                        sql.push_str(&format!(" AND h.asset_type = ${}", placeholder()));
                    }
                    if filter.symbol.is_some() {
                        sql.push_str(&format!(" AND UPPER(h.symbol) = ${}", placeholder()));
                    }
                    sql.push_str(" ORDER BY h.symbol, h.id");
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(user_id);
                    if let Some(account_id) = filter.account_id {
                        query = query.bind(account_id);
                    }
                    if filter.active_only {
                        query = query.bind(true);
                    }
                    if let Some(asset_type) = filter.asset_type {
                        query = query.bind(asset_type.as_str());
                    }
                    if let Some(symbol) = &filter.symbol {
                        query = query.bind(symbol.trim().to_uppercase());
                    }
                    let rows = query.fetch_all(&self.pool).await.map_err(store_error)?;
                    rows_to(&rows, holding_from_row)
                }
            }

            #[async_trait::async_trait]
            impl SnapshotStore for $store {
                async fn insert_snapshot(
                    &self,
                    snapshot: &NewSnapshot,
                ) -> Result<SnapshotRecord, StoreError> {
                    let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                    let record = insert_snapshot_in(&mut tx, snapshot).await?;
                    tx.commit().await.map_err(store_error)?;
                    Ok(record)
                }

                async fn latest_snapshots_for_user(
                    &self,
                    user_id: Uuid,
                ) -> Result<Vec<SnapshotRecord>, StoreError> {
                    let sql = format!(
                        "SELECT {SNAPSHOT_COLUMNS} FROM {USER_ACCOUNTS} \
                         JOIN balance_snapshots s ON s.id = ( \
                             SELECT l.id FROM balance_snapshots l WHERE l.account_id = a.id \
                             ORDER BY l.captured_at DESC, l.id DESC LIMIT 1) \
                         ORDER BY a.name, a.id"
                    );
                    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .bind(user_id)
                        .fetch_all(&self.pool)
                        .await
                        .map_err(store_error)?;
                    rows_to(&rows, snapshot_from_row)
                }

                async fn balance_history(
                    &self,
                    user_id: Uuid,
                    account_id: Uuid,
                    start: DateTime<Utc>,
                    end: DateTime<Utc>,
                    source: Option<SnapshotSource>,
                ) -> Result<Vec<SnapshotRecord>, StoreError> {
                    let filter = if source.is_some() {
                        " AND s.source = $5"
                    } else {
                        ""
                    };
                    let sql = format!(
                        "SELECT {SNAPSHOT_COLUMNS} FROM {USER_ACCOUNTS} \
                         JOIN balance_snapshots s ON s.account_id = a.id \
                         WHERE a.id = $2 AND s.captured_at >= $3 AND s.captured_at <= $4{filter} \
                         ORDER BY s.captured_at, s.id"
                    );
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .bind(user_id)
                        .bind(account_id)
                        .bind(start)
                        .bind(end);
                    if let Some(source) = source {
                        query = query.bind(source.as_str());
                    }
                    let rows = query.fetch_all(&self.pool).await.map_err(store_error)?;
                    rows_to(&rows, snapshot_from_row)
                }

                async fn snapshots_for_account(
                    &self,
                    user_id: Uuid,
                    account_id: Uuid,
                    limit: u32,
                    source: Option<SnapshotSource>,
                ) -> Result<Page<SnapshotRecord>, StoreError> {
                    let (filter, paging) = if source.is_some() {
                        (" AND s.source = $3", "LIMIT $4")
                    } else {
                        ("", "LIMIT $3")
                    };
                    let scope = format!(
                        "FROM {USER_ACCOUNTS} JOIN balance_snapshots s ON s.account_id = a.id \
                         WHERE a.id = $2{filter}"
                    );
                    let mut counter = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                        "SELECT COUNT(*) {scope}"
                    )))
                    .bind(user_id)
                    .bind(account_id);
                    let mut lister = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "SELECT {SNAPSHOT_COLUMNS} {scope} \
                         ORDER BY s.captured_at DESC, s.id DESC {paging}"
                    )))
                    .bind(user_id)
                    .bind(account_id);
                    if let Some(source) = source {
                        counter = counter.bind(source.as_str());
                        lister = lister.bind(source.as_str());
                    }
                    let total = counter.fetch_one(&self.pool).await.map_err(store_error)?;
                    let rows = lister
                        .bind(i64::from(limit))
                        .fetch_all(&self.pool)
                        .await
                        .map_err(store_error)?;
                    Ok(Page {
                        items: rows_to(&rows, snapshot_from_row)?,
                        total_count: count(total),
                    })
                }
            }

            /// The stored balance and available balance of an account, when it exists.
            async fn stored_balances(
                tx: &mut sqlx::Transaction<'static, $db>,
                connection_id: Uuid,
                provider_account_id: &str,
            ) -> Result<Option<(Decimal, Option<Decimal>)>, StoreError> {
                let row = sqlx::query(
                    "SELECT balance_amount, available_balance_amount FROM accounts \
                     WHERE connection_id = $1 AND provider_account_id = $2",
                )
                .bind(connection_id)
                .bind(provider_account_id)
                .fetch_optional(&mut **tx)
                .await
                .map_err(store_error)?;
                row.map(|row| {
                    Ok((
                        decimal(&row, "balance_amount")?,
                        optional_decimal(&row, "available_balance_amount")?,
                    ))
                })
                .transpose()
                .map_err(store_error)
            }

            /// Whether the account has a `file_import` snapshot captured at the same instant
            /// with the same figures.
            async fn has_import_snapshot(
                tx: &mut sqlx::Transaction<'static, $db>,
                account_id: Uuid,
                snapshot: &ImportSnapshot,
            ) -> Result<bool, StoreError> {
                let rows = sqlx::query(
                    "SELECT balance, available_balance, holdings_value, cash_value \
                     FROM balance_snapshots \
                     WHERE account_id = $1 AND source = $2 AND captured_at = $3",
                )
                .bind(account_id)
                .bind(SnapshotSource::FileImport.as_str())
                .bind(snapshot.captured_at)
                .fetch_all(&mut **tx)
                .await
                .map_err(store_error)?;
                for row in &rows {
                    let same = decimal(row, "balance").map_err(store_error)? == snapshot.balance
                        && optional_decimal(row, "available_balance").map_err(store_error)?
                            == snapshot.available_balance
                        && optional_decimal(row, "holdings_value").map_err(store_error)?
                            == snapshot.holdings_value
                        && optional_decimal(row, "cash_value").map_err(store_error)?
                            == snapshot.cash_value;
                    if same {
                        return Ok(true);
                    }
                }
                Ok(false)
            }

            /// Writes one account of an import with its transactions, holdings and snapshot.
            async fn import_account(
                tx: &mut sqlx::Transaction<'static, $db>,
                connection_id: Uuid,
                item: &ImportAccount,
                now: DateTime<Utc>,
                counts: &mut ImportCounts,
            ) -> Result<(), StoreError> {
                let mut account = std::borrow::Cow::Borrowed(&item.account);
                if !item.balance_reported {
                    let stored =
                        stored_balances(tx, connection_id, &account.provider_account_id).await?;
                    if let Some((balance, available)) = stored {
                        let account = account.to_mut();
                        account.balance_amount = balance;
                        account.available_balance_amount = available;
                    }
                }
                let (account_id, outcome) =
                    upsert_account_in(tx, connection_id, &account, now).await?;
                match outcome {
                    Upserted::Created => counts.accounts_created += 1,
                    Upserted::Updated => counts.accounts_updated += 1,
                    Upserted::Unchanged => counts.accounts_unchanged += 1,
                }
                let mut created = 0;
                for (_, outcome) in
                    upsert_transactions_in(tx, account_id, &item.transactions, now).await?
                {
                    match outcome {
                        Upserted::Created => created += 1,
                        Upserted::Updated => counts.transactions_updated += 1,
                        Upserted::Unchanged => counts.transactions_skipped += 1,
                    }
                }
                add_to_transaction_count(tx, account_id, created).await?;
                counts.transactions_created += created;
                for holding in &item.holdings {
                    match upsert_holding_in(tx, account_id, holding, now).await?.1 {
                        Upserted::Created => counts.holdings_created += 1,
                        Upserted::Updated => counts.holdings_updated += 1,
                        Upserted::Unchanged => counts.holdings_unchanged += 1,
                    }
                }
                if let Some(snapshot) = &item.snapshot {
                    if !has_import_snapshot(tx, account_id, snapshot).await? {
                        insert_snapshot_in(
                            tx,
                            &NewSnapshot {
                                account_id,
                                balance: snapshot.balance,
                                available_balance: snapshot.available_balance,
                                holdings_value: snapshot.holdings_value,
                                cash_value: snapshot.cash_value,
                                currency: account.currency.clone(),
                                source: SnapshotSource::FileImport,
                                captured_at: snapshot.captured_at,
                            },
                        )
                        .await?;
                        counts.snapshots_created += 1;
                    }
                }
                Ok(())
            }

            #[async_trait::async_trait]
            impl ImportStore for $store {
                async fn apply_import(
                    &self,
                    user_id: Uuid,
                    batch: &ImportBatch,
                    now: DateTime<Utc>,
                ) -> Result<ImportCounts, StoreError> {
                    let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                    let mut counts = ImportCounts::default();
                    for institution in &batch.institutions {
                        let connection = find_or_create_connection_in(
                            &mut tx,
                            user_id,
                            FILE_IMPORT_PROVIDER,
                            Some(&institution.alias),
                            now,
                        )
                        .await?;
                        counts.connection_ids.push(connection.id);
                        for item in &institution.accounts {
                            import_account(&mut tx, connection.id, item, now, &mut counts).await?;
                        }
                        sqlx::query(
                            "UPDATE connections SET last_sync_at = $2, updated_at = $2 \
                             WHERE id = $1",
                        )
                        .bind(connection.id)
                        .bind(now)
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    }
                    tx.commit().await.map_err(store_error)?;
                    Ok(counts)
                }
            }

            /// The id, balances and currency of the connection's account with this provider
            /// id; [`StoreError::Other`] when there is none.
            async fn sync_account_in(
                tx: &mut sqlx::Transaction<'static, $db>,
                connection_id: Uuid,
                provider_account_id: &str,
            ) -> Result<AccountRecord, StoreError> {
                let sql = format!(
                    "SELECT {ACCOUNT_COLUMNS} FROM accounts a \
                     WHERE a.connection_id = $1 AND a.provider_account_id = $2"
                );
                let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(connection_id)
                    .bind(provider_account_id)
                    .fetch_optional(&mut **tx)
                    .await
                    .map_err(store_error)?;
                match row {
                    Some(row) => account_from_row(&row).map_err(store_error),
                    None => Err(StoreError::Other(format!(
                        "unknown account {provider_account_id:?} in connection {connection_id}"
                    ))),
                }
            }

            /// Writes one account's part of a sync batch.
            async fn sync_account(
                tx: &mut sqlx::Transaction<'static, $db>,
                connection_id: Uuid,
                item: &SyncAccountData,
                now: DateTime<Utc>,
                counts: &mut SyncCounts,
            ) -> Result<(), StoreError> {
                let account = sync_account_in(tx, connection_id, &item.provider_account_id).await?;
                if let Some(transactions) = &item.transactions {
                    let mut created = 0;
                    for done in upsert_transactions_in(tx, account.id, transactions, now).await? {
                        if done.1 == Upserted::Created {
                            created += 1;
                        }
                        tally(&mut counts.transactions, done);
                    }
                    add_to_transaction_count(tx, account.id, created).await?;
                }
                if let Some(holdings) = &item.holdings {
                    for holding in holdings {
                        let done = upsert_holding_in(tx, account.id, holding, now).await?;
                        tally(&mut counts.holdings, done);
                    }
                    let keep: Vec<String> = holdings
                        .iter()
                        .map(|holding| holding.provider_holding_id.clone())
                        .collect();
                    counts.holdings_deactivated +=
                        deactivate_missing_holdings_in(&mut **tx, account.id, &keep, now).await?;
                }
                if let Some(snapshot) = &item.snapshot {
                    insert_snapshot_in(
                        tx,
                        &NewSnapshot {
                            account_id: account.id,
                            balance: account.balance_amount,
                            available_balance: account.available_balance_amount,
                            holdings_value: snapshot.holdings_value,
                            cash_value: snapshot.cash_value,
                            currency: account.currency.clone(),
                            source: snapshot.source,
                            captured_at: now,
                        },
                    )
                    .await?;
                    counts.snapshots_created += 1;
                }
                Ok(())
            }

            #[async_trait::async_trait]
            impl SyncStore for $store {
                async fn apply_sync(
                    &self,
                    connection_id: Uuid,
                    batch: &SyncBatch,
                    now: DateTime<Utc>,
                ) -> Result<SyncCounts, StoreError> {
                    let mut tx = self.pool.begin_with($begin_write).await.map_err(store_error)?;
                    // Locks the connection's row (PostgreSQL) so syncs of one connection are
                    // applied one after the other; SQLite's BEGIN IMMEDIATE serializes writers.
                    let locked = sqlx::query(
                        "UPDATE connections SET updated_at = updated_at WHERE id = $1",
                    )
                    .bind(connection_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                    if locked.rows_affected() == 0 {
                        return Err(StoreError::Other(format!(
                            "unknown connection {connection_id}"
                        )));
                    }
                    let mut counts = SyncCounts::default();
                    for account in &batch.accounts {
                        let done = upsert_account_in(&mut tx, connection_id, account, now).await?;
                        tally(&mut counts.accounts, done);
                    }
                    for item in &batch.per_account {
                        sync_account(&mut tx, connection_id, item, now, &mut counts).await?;
                    }
                    if batch.mark_synced {
                        sqlx::query(
                            "UPDATE connections SET last_sync_at = $2, updated_at = $2 \
                             WHERE id = $1",
                        )
                        .bind(connection_id)
                        .bind(now)
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    }
                    tx.commit().await.map_err(store_error)?;
                    Ok(counts)
                }
            }

            $crate::store::sql_providers::impl_providers_store!($store, $db, $begin_write);
        }
    };
}
pub(crate) use impl_records_store;
