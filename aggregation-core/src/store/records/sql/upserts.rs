//! The upserts of the financial records, inside a caller's transaction. Accounts, holdings and
//! transactions share one algorithm: a multi-row insert per chunk, one look-up of the rows that
//! already existed and one multi-row rewrite of those that changed, instead of round trips per
//! row. Each kind only names its columns and binds them ([`Upsert`]).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::backend::{
    Backend, QueryBuilder, Separated, SqlRow, Tx, query, query_as, query_scalar,
};
use crate::store::records::sql::{SELECT_ACCOUNT, SELECT_HOLDING, SELECT_TRANSACTION};
use crate::store::sql::{Upserted, currency, optional_text, text};
use crate::store::{
    AccountRecord, CategorySource, HoldingRecord, NewAccount, NewHolding, NewTransaction,
    StoreError, TransactionRecord, TransactionSource, mask_account_number,
};

/// A kind of record the upserts write: a row is keyed on its parent's id and the provider's id,
/// and every column in [`Upsert::COLUMNS`] is rewritten when it changed.
pub(in crate::store) trait Upsert: Sync {
    /// What the look-up of existing rows reads.
    type Stored: SqlRow;
    /// The table, and its alias in [`Upsert::SELECT`].
    const TABLE: &str;
    const ALIAS: &str;
    /// The parent id and provider id columns: the unique key.
    const PARENT: &str;
    const KEY: &str;
    /// The columns [`Upsert::bind`] fills, in order, separated by `, `.
    const COLUMNS: &str;
    /// The `SELECT` list of [`Upsert::Stored`].
    const SELECT: &str;
    /// Whether rows carry `last_synced_at`, moved by every upsert, even one that changed nothing.
    const SYNCED: bool;
    /// Columns written when a row is inserted and never rewritten (where it came from), each
    /// followed by `, `; [`Upsert::bind_inserted`] fills them.
    const INSERTED: &str = "";

    /// The provider's id.
    fn key(&self) -> &str;
    /// Binds [`Upsert::COLUMNS`].
    fn bind<B: Backend>(&self, row: &mut Separated<'_, B>);
    /// Binds [`Upsert::INSERTED`].
    fn bind_inserted<B: Backend>(&self, _row: &mut Separated<'_, B>) {}
    /// The provider's id and the id of a stored row.
    fn stored_key(stored: &Self::Stored) -> (&str, Uuid);
    /// Whether a stored row already holds every field of `self`.
    fn matches(&self, stored: &Self::Stored) -> bool;
}

/// The stored form of an account's number: `****` and its last four characters.
fn masked(account: &NewAccount) -> Option<String> {
    account
        .account_number
        .as_deref()
        .map(str::trim)
        .filter(|number| !number.is_empty())
        .map(mask_account_number)
}

impl Upsert for NewAccount {
    type Stored = AccountRecord;
    const TABLE: &str = "accounts";
    const ALIAS: &str = "a";
    const PARENT: &str = "connection_id";
    const KEY: &str = "provider_account_id";
    const COLUMNS: &str = "account_number_masked, name, account_type, currency, balance_amount, \
         available_balance_amount, is_active";
    const SELECT: &str = SELECT_ACCOUNT;
    const SYNCED: bool = true;

    fn key(&self) -> &str {
        &self.provider_account_id
    }

    fn bind<B: Backend>(&self, row: &mut Separated<'_, B>) {
        row.push_bind(masked(self))
            .push_bind(self.name.as_str())
            .push_bind(self.account_type.as_str())
            .push_bind(currency(&self.currency))
            .push_bind(text(self.balance_amount))
            .push_bind(optional_text(self.available_balance_amount))
            .push_bind(self.is_active);
    }

    fn stored_key(stored: &AccountRecord) -> (&str, Uuid) {
        (&stored.provider_account_id, stored.id)
    }

    fn matches(&self, stored: &AccountRecord) -> bool {
        stored.account_number_masked == masked(self)
            && stored.name == self.name
            && stored.account_type == self.account_type
            && stored.currency == currency(&self.currency)
            && stored.balance_amount == self.balance_amount
            && stored.available_balance_amount == self.available_balance_amount
            && stored.is_active == self.is_active
    }
}

impl Upsert for NewHolding {
    type Stored = HoldingRecord;
    const TABLE: &str = "holdings";
    const ALIAS: &str = "h";
    const PARENT: &str = "account_id";
    const KEY: &str = "provider_holding_id";
    const COLUMNS: &str = "symbol, security_name, asset_type, quantity, cost_basis, market_value, \
         currency, average_price, current_price, unrealized_gain_loss, is_active";
    const SELECT: &str = SELECT_HOLDING;
    const SYNCED: bool = true;

    fn key(&self) -> &str {
        &self.provider_holding_id
    }

    fn bind<B: Backend>(&self, row: &mut Separated<'_, B>) {
        row.push_bind(self.symbol.as_str())
            .push_bind(self.security_name.as_deref())
            .push_bind(self.asset_type.as_str())
            .push_bind(text(self.quantity))
            .push_bind(optional_text(self.cost_basis))
            .push_bind(text(self.market_value))
            .push_bind(currency(&self.currency))
            .push_bind(optional_text(self.average_price))
            .push_bind(optional_text(self.current_price))
            .push_bind(optional_text(self.unrealized_gain_loss))
            // An upserted holding is reported, so active (again).
            .push_bind(true);
    }

    fn stored_key(stored: &HoldingRecord) -> (&str, Uuid) {
        (&stored.provider_holding_id, stored.id)
    }

    fn matches(&self, stored: &HoldingRecord) -> bool {
        stored.symbol == self.symbol
            && stored.security_name == self.security_name
            && stored.asset_type == self.asset_type
            && stored.quantity == self.quantity
            && stored.cost_basis == self.cost_basis
            && stored.market_value == self.market_value
            && stored.currency == currency(&self.currency)
            && stored.average_price == self.average_price
            && stored.current_price == self.current_price
            && stored.unrealized_gain_loss == self.unrealized_gain_loss
            && stored.is_active
    }
}

impl Upsert for NewTransaction {
    type Stored = TransactionRecord;
    const TABLE: &str = "transactions";
    const ALIAS: &str = "t";
    const PARENT: &str = "account_id";
    const KEY: &str = "provider_transaction_id";
    const COLUMNS: &str = "transaction_type, subtype, status, amount, currency, description, \
         symbol, security_name, quantity, unit_price, commission, transaction_date, \
         settlement_date";
    const SELECT: &str = SELECT_TRANSACTION;
    const SYNCED: bool = false;

    fn key(&self) -> &str {
        &self.provider_transaction_id
    }

    fn bind<B: Backend>(&self, row: &mut Separated<'_, B>) {
        row.push_bind(self.transaction_type.as_str())
            .push_bind(self.subtype.as_deref())
            .push_bind(self.status.as_str())
            .push_bind(text(self.amount))
            .push_bind(currency(&self.currency))
            .push_bind(self.description.as_deref())
            .push_bind(self.symbol.as_deref())
            .push_bind(self.security_name.as_deref())
            .push_bind(optional_text(self.quantity))
            .push_bind(optional_text(self.unit_price))
            .push_bind(optional_text(self.commission))
            .push_bind(self.transaction_date)
            .push_bind(self.settlement_date);
    }

    fn stored_key(stored: &TransactionRecord) -> (&str, Uuid) {
        (&stored.provider_transaction_id, stored.id)
    }

    fn matches(&self, stored: &TransactionRecord) -> bool {
        stored.transaction_type == self.transaction_type
            && stored.subtype == self.subtype
            && stored.status == self.status
            && stored.amount == self.amount
            && stored.currency == currency(&self.currency)
            && stored.description == self.description
            && stored.symbol == self.symbol
            && stored.security_name == self.security_name
            && stored.quantity == self.quantity
            && stored.unit_price == self.unit_price
            && stored.commission == self.commission
            && stored.transaction_date == self.transaction_date
            && stored.settlement_date == self.settlement_date
    }
}

/// A transaction with where it came from: the kind of source and the origin (the provider's
/// slug or the file format's code), written when its row is inserted.
pub(in crate::store) struct Sourced<'a> {
    pub(in crate::store) item: &'a NewTransaction,
    pub(in crate::store) source: TransactionSource,
    pub(in crate::store) origin: &'a str,
}

impl Upsert for Sourced<'_> {
    type Stored = TransactionRecord;
    const TABLE: &'static str = NewTransaction::TABLE;
    const ALIAS: &'static str = NewTransaction::ALIAS;
    const PARENT: &'static str = NewTransaction::PARENT;
    const KEY: &'static str = NewTransaction::KEY;
    const COLUMNS: &'static str = NewTransaction::COLUMNS;
    const SELECT: &'static str = NewTransaction::SELECT;
    const SYNCED: bool = NewTransaction::SYNCED;
    const INSERTED: &'static str = "source, origin, pending_transaction_id, merchant_name, \
         merchant_code, bank_code, category, category_source, ";

    fn key(&self) -> &str {
        self.item.key()
    }

    fn bind<B: Backend>(&self, row: &mut Separated<'_, B>) {
        self.item.bind(row);
    }

    fn bind_inserted<B: Backend>(&self, row: &mut Separated<'_, B>) {
        // Enrichment of a new row: the merchant from its description, the category its
        // merchant code names, else its bank transaction code's (a provider's category and
        // rules, of higher precedence, come later).
        let derived = crate::enrich::derive(
            self.item.description.as_deref(),
            self.item.subtype.as_deref(),
        );
        let merchant_code = self
            .item
            .merchant_code
            .as_deref()
            .map(str::trim)
            .filter(|code| !code.is_empty());
        let (category, category_source) =
            match merchant_code.and_then(crate::enrich::codes::merchant_code_category) {
                Some(category) => (Some(category), Some(CategorySource::MerchantCode)),
                None => (
                    derived.bank_code_category,
                    derived.bank_code_category.map(|_| CategorySource::BankCode),
                ),
            };
        row.push_bind(self.source.as_str())
            .push_bind(self.origin)
            .push_bind(self.item.pending_transaction_id.as_deref())
            .push_bind(derived.merchant_name)
            .push_bind(merchant_code)
            .push_bind(derived.bank_code)
            .push_bind(category)
            .push_bind(category_source.map(|source| source.as_str()));
    }

    fn stored_key(stored: &TransactionRecord) -> (&str, Uuid) {
        NewTransaction::stored_key(stored)
    }

    fn matches(&self, stored: &TransactionRecord) -> bool {
        self.item.matches(stored)
    }
}

/// Upserts `items` under `parent`; outcomes in input order. A provider id repeated within a
/// chunk is written one row at a time, so the later one wins.
pub(in crate::store) async fn upsert_in<B: Backend, T: Upsert>(
    tx: &mut Tx<B>,
    parent: Uuid,
    items: &[T],
    now: DateTime<Utc>,
) -> Result<Vec<(Uuid, Upserted)>, StoreError> {
    let mut outcomes = Vec::with_capacity(items.len());
    for chunk in items.chunks(B::ROWS_PER_STATEMENT) {
        let mut seen = HashSet::with_capacity(chunk.len());
        if chunk.iter().all(|item| seen.insert(item.key())) {
            outcomes.extend(upsert_chunk(tx, parent, chunk, now).await?);
        } else {
            for item in chunk {
                let done = upsert_chunk(tx, parent, std::slice::from_ref(item), now);
                outcomes.extend(done.await?);
            }
        }
    }
    Ok(outcomes)
}

/// Upserts the account's transactions and adds those created to its stored count (same
/// transaction as the inserts, so the count never drifts).
pub(in crate::store) async fn upsert_transactions_in<B: Backend, T: Upsert>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    items: &[T],
    now: DateTime<Utc>,
) -> Result<Vec<(Uuid, Upserted)>, StoreError> {
    let outcomes = upsert_in(tx, account_id, items, now).await?;
    let created = outcomes
        .iter()
        .filter(|(_, outcome)| *outcome == Upserted::Created)
        .count();
    if created > 0 {
        query::<B>("UPDATE accounts SET transaction_count = transaction_count + $2 WHERE id = $1")
            .bind(account_id)
            .bind(i64::try_from(created).unwrap_or(i64::MAX))
            .execute(&mut **tx)
            .await?;
    }
    Ok(outcomes)
}

/// Deletes the account's pending transactions dated within `start..=end` whose provider id is
/// not in `keep` (the provider no longer returns them for that window: they booked under
/// another id, or were dropped), keeping the account's transaction count in step. How many
/// were deleted. The window's pending rows are read and the missing ones deleted by id in
/// chunks: a `NOT IN` list of every id the provider returned grew with the sync (on
/// PostgreSQL a statement past the socket's send buffer waits for a delayed ACK).
pub(in crate::store) async fn delete_missing_pending_in<B: Backend>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    keep: &HashSet<&str>,
    (start, end): (chrono::NaiveDate, chrono::NaiveDate),
) -> Result<u64, StoreError> {
    let pending: Vec<(Uuid, String)> = query_as::<B, _>(
        "SELECT id, provider_transaction_id FROM transactions WHERE account_id = $1 \
         AND status = $2 AND transaction_date >= $3 AND transaction_date <= $4",
    )
    .bind(account_id)
    .bind(crate::store::TransactionStatus::Pending.as_str())
    .bind(start)
    .bind(end)
    .fetch_all(&mut **tx)
    .await?;
    let missing: Vec<Uuid> = pending
        .into_iter()
        .filter(|(_, key)| !keep.contains(key.as_str()))
        .map(|(id, _)| id)
        .collect();
    let mut removed = 0;
    for chunk in missing.chunks(B::KEYS_PER_STATEMENT) {
        let mut delete = QueryBuilder::<B>::new("DELETE FROM transactions WHERE id IN (");
        let mut listed = delete.separated(", ");
        for id in chunk {
            listed.push_bind(*id);
        }
        delete.push(")");
        removed += delete.build().execute(&mut **tx).await?.rows_affected();
    }
    if removed > 0 {
        query::<B>("UPDATE accounts SET transaction_count = transaction_count - $2 WHERE id = $1")
            .bind(account_id)
            .bind(i64::try_from(removed).unwrap_or(i64::MAX))
            .execute(&mut **tx)
            .await?;
    }
    Ok(removed)
}

/// Writes `rows` (fresh id and item) in one statement; with `rewrite`, a row that exists
/// already gets the new values, else it is left alone. The provider id and id of each row
/// written.
async fn write_rows<B: Backend, T: Upsert>(
    tx: &mut Tx<B>,
    parent: Uuid,
    rows: &[(Uuid, &T)],
    now: DateTime<Utc>,
    rewrite: bool,
) -> Result<HashMap<String, Uuid>, StoreError> {
    if rows.is_empty() {
        return Ok(HashMap::new());
    }
    let synced = if T::SYNCED { ", last_synced_at" } else { "" };
    let columns = format!("{}{synced}", T::COLUMNS);
    // SQLite binds QueryBuilder's anonymous `?` in order; numbered `$n` would be looked up by a
    // linear scan each, which makes thousands of them quadratic.
    let mut insert = QueryBuilder::<B>::new(format!(
        "INSERT INTO {} (id, {}, {}, {}{}, created_at, updated_at) ",
        T::TABLE,
        T::PARENT,
        T::KEY,
        T::INSERTED,
        columns
    ));
    insert.push_values(rows, |mut row, (id, item)| {
        row.push_bind(*id).push_bind(parent).push_bind(item.key());
        item.bind_inserted(&mut row);
        item.bind(&mut row);
        if T::SYNCED {
            row.push_bind(now);
        }
        row.push_bind(now).push_bind(now);
    });
    insert.push(format_args!(" ON CONFLICT ({}, {}) ", T::PARENT, T::KEY));
    if rewrite {
        let set: Vec<String> = columns
            .split(", ")
            .chain(["updated_at"])
            .map(|column| format!("{column} = excluded.{column}"))
            .collect();
        insert.push(format_args!("DO UPDATE SET {}", set.join(", ")));
    } else {
        insert.push("DO NOTHING");
    }
    insert.push(format_args!(" RETURNING {}, id", T::KEY));
    let written: Vec<(String, Uuid)> = insert.build_query_as().fetch_all(&mut **tx).await?;
    Ok(written.into_iter().collect())
}

/// Inserts the rows that are new, reads the others, rewrites those that changed (and any that
/// another writer removed meanwhile) and moves `last_synced_at` of the rest. Provider ids must
/// be distinct within `chunk`.
async fn upsert_chunk<B: Backend, T: Upsert>(
    tx: &mut Tx<B>,
    parent: Uuid,
    chunk: &[T],
    now: DateTime<Utc>,
) -> Result<Vec<(Uuid, Upserted)>, StoreError> {
    let fresh: Vec<(Uuid, &T)> = chunk.iter().map(|item| (Uuid::now_v7(), item)).collect();
    let inserted = write_rows(tx, parent, &fresh, now, false).await?;
    let mut existing = HashMap::new();
    if inserted.len() < fresh.len() {
        let mut lookup = QueryBuilder::<B>::new(format!("{} FROM ", T::SELECT));
        lookup.push_keyed_rows(
            fresh
                .iter()
                .filter(|(_, item)| !inserted.contains_key(item.key()))
                .map(|(_, item)| item.key()),
            (T::TABLE, T::ALIAS),
            (T::PARENT, parent),
            T::KEY,
        );
        let rows: Vec<T::Stored> = lookup.build_query_as().fetch_all(&mut **tx).await?;
        for stored in rows {
            let (key, id) = T::stored_key(&stored);
            existing.insert(key.to_owned(), (id, stored));
        }
    }
    let changed: Vec<(Uuid, &T)> = fresh
        .iter()
        .filter(|(_, item)| {
            !inserted.contains_key(item.key())
                && existing
                    .get(item.key())
                    .is_none_or(|(_, stored)| !item.matches(stored))
        })
        .copied()
        .collect();
    let rewritten = write_rows(tx, parent, &changed, now, true).await?;
    let outcomes: Vec<(Uuid, Upserted)> = fresh
        .iter()
        .map(|(fresh_id, item)| {
            if inserted.contains_key(item.key()) {
                (*fresh_id, Upserted::Created)
            } else if let Some(id) = rewritten.get(item.key()) {
                // The fresh id: another writer removed the row it conflicted with.
                let outcome = if id == fresh_id {
                    Upserted::Created
                } else {
                    Upserted::Updated
                };
                (*id, outcome)
            } else {
                let stored = existing.get(item.key()).map_or(*fresh_id, |(id, _)| *id);
                (stored, Upserted::Unchanged)
            }
        })
        .collect();
    let unchanged = outcomes
        .iter()
        .filter(|(_, outcome)| *outcome == Upserted::Unchanged);
    if T::SYNCED && unchanged.clone().next().is_some() {
        let mut touch =
            QueryBuilder::<B>::new(format!("UPDATE {} SET last_synced_at = ", T::TABLE));
        touch.push_bind(now).push(" WHERE id IN (");
        let mut listed = touch.separated(", ");
        for (id, _) in unchanged {
            listed.push_bind(*id);
        }
        touch.push(")");
        touch.build().execute(&mut **tx).await?;
    }
    Ok(outcomes)
}

/// The connection's account with this provider id, if any.
pub(in crate::store) async fn account_in<B: Backend>(
    tx: &mut Tx<B>,
    connection_id: Uuid,
    provider_account_id: &str,
) -> Result<Option<AccountRecord>, StoreError> {
    let sql = format!(
        "{SELECT_ACCOUNT} FROM accounts a WHERE a.connection_id = $1 AND a.provider_account_id = $2"
    );
    Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
        .bind(connection_id)
        .bind(provider_account_id)
        .fetch_optional(&mut **tx)
        .await?)
}

/// Fails with [`StoreError::AccountLimit`] when the user holds more than `limit` accounts, as
/// the transaction sees them. Locks the user's row first (PostgreSQL; SQLite's `BEGIN
/// IMMEDIATE` serializes writers already), so two writes of one user that each stay within the
/// limit cannot pass it together. Called after a write created accounts, before its commit.
pub(in crate::store) async fn check_account_limit<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    limit: u64,
) -> Result<(), StoreError> {
    query::<B>("UPDATE users SET updated_at = updated_at WHERE id = $1")
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    let held: i64 = query_scalar::<B, _>(
        "SELECT COUNT(*) FROM accounts a JOIN connections c ON c.id = a.connection_id \
         WHERE c.user_id = $1",
    )
    .bind(user_id)
    .fetch_one(&mut **tx)
    .await?;
    if u64::try_from(held).unwrap_or(0) > limit {
        return Err(StoreError::AccountLimit { limit });
    }
    Ok(())
}
