//! The upserts of the financial records, inside a caller's transaction: single rows, and the
//! multi-row insert of transaction batches.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;
use uuid::Uuid;

use super::records::{SELECT_ACCOUNT, SELECT_HOLDING, SELECT_TRANSACTION};
use super::{Db, Tx};
use crate::store::sql::{Upserted, currency, optional_text, text};
use crate::store::{
    AccountRecord, HoldingRecord, NewAccount, NewHolding, NewTransaction, StoreError,
    TransactionRecord, mask_account_number,
};

/// Rows per multi-row statement: 18 parameters a row stay below SQLite's 32,766 and
/// PostgreSQL's 65,535 bound parameters.
const TRANSACTION_CHUNK: usize = 1_000;

/// Adds newly inserted transactions to the account's stored count (same transaction as the
/// inserts, so the count never drifts).
pub(super) async fn add_to_transaction_count(
    tx: &mut Tx,
    account_id: Uuid,
    created: u64,
) -> Result<(), StoreError> {
    if created > 0 {
        sqlx::query("UPDATE accounts SET transaction_count = transaction_count + $2 WHERE id = $1")
            .bind(account_id)
            .bind(i64::try_from(created).unwrap_or(i64::MAX))
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Inserts (or, with an `ON CONFLICT ... DO UPDATE` clause as `conflict`, rewrites) one
/// account; the id of the row written, if any.
async fn write_account(
    tx: &mut Tx,
    connection_id: Uuid,
    account: &NewAccount,
    (id, masked, currency): (Uuid, Option<&str>, &str),
    now: DateTime<Utc>,
    conflict: &str,
) -> Result<Option<Uuid>, StoreError> {
    let sql = format!(
        "INSERT INTO accounts (id, connection_id, provider_account_id, account_number_masked, \
         name, account_type, currency, balance_amount, available_balance_amount, is_active, \
         last_synced_at, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $11) \
         ON CONFLICT (connection_id, provider_account_id) {conflict} RETURNING id"
    );
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(connection_id)
        .bind(&account.provider_account_id)
        .bind(masked)
        .bind(&account.name)
        .bind(account.account_type.as_str())
        .bind(currency)
        .bind(text(account.balance_amount))
        .bind(optional_text(account.available_balance_amount))
        .bind(account.is_active)
        .bind(now)
        .fetch_optional(&mut **tx)
        .await?)
}

const REWRITE_ACCOUNT: &str = "DO UPDATE SET \
     account_number_masked = excluded.account_number_masked, name = excluded.name, \
     account_type = excluded.account_type, currency = excluded.currency, \
     balance_amount = excluded.balance_amount, \
     available_balance_amount = excluded.available_balance_amount, \
     is_active = excluded.is_active, last_synced_at = excluded.last_synced_at, \
     updated_at = excluded.updated_at";

pub(super) async fn upsert_account_in(
    tx: &mut Tx,
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
    let row = (Uuid::now_v7(), masked.as_deref(), currency.as_str());
    let new = write_account(tx, connection_id, account, row, now, "DO NOTHING").await?;
    if let Some(id) = new {
        return Ok((id, Upserted::Created));
    }
    let existing = account_in(tx, connection_id, &account.provider_account_id).await?;
    if let Some(existing) = existing.filter(|existing| {
        existing.account_number_masked == masked
            && existing.name == account.name
            && existing.account_type == account.account_type
            && existing.currency == currency
            && existing.balance_amount == account.balance_amount
            && existing.available_balance_amount == account.available_balance_amount
            && existing.is_active == account.is_active
    }) {
        sqlx::query("UPDATE accounts SET last_synced_at = $2 WHERE id = $1")
            .bind(existing.id)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        return Ok((existing.id, Upserted::Unchanged));
    }
    let written = write_account(tx, connection_id, account, row, now, REWRITE_ACCOUNT).await?;
    Ok(rewritten(row.0, written))
}

/// The outcome of a write with an `ON CONFLICT ... DO UPDATE` clause: created when the row
/// written got the fresh id (another writer had removed the one it conflicted with).
fn rewritten(fresh_id: Uuid, written: Option<Uuid>) -> (Uuid, Upserted) {
    match written {
        Some(id) if id != fresh_id => (id, Upserted::Updated),
        _ => (fresh_id, Upserted::Created),
    }
}

/// The connection's account with this provider id, if any.
pub(super) async fn account_in(
    tx: &mut Tx,
    connection_id: Uuid,
    provider_account_id: &str,
) -> Result<Option<AccountRecord>, StoreError> {
    let sql = format!(
        "{SELECT_ACCOUNT} FROM accounts a WHERE a.connection_id = $1 AND a.provider_account_id = $2"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(connection_id)
        .bind(provider_account_id)
        .fetch_optional(&mut **tx)
        .await?)
}

/// Upserts a batch of the account's transactions with one multi-row insert per chunk, one
/// look-up of the rows that already existed and one multi-row rewrite of those that changed,
/// instead of round trips per row. Outcomes in input order.
pub(super) async fn upsert_transactions_in(
    tx: &mut Tx,
    account_id: Uuid,
    items: &[NewTransaction],
    now: DateTime<Utc>,
) -> Result<Vec<(Uuid, Upserted)>, StoreError> {
    let mut outcomes = Vec::with_capacity(items.len());
    for chunk in items.chunks(TRANSACTION_CHUNK) {
        let mut seen = HashSet::with_capacity(chunk.len());
        let repeats = !chunk
            .iter()
            .all(|item| seen.insert(item.provider_transaction_id.as_str()));
        if repeats {
            // A provider id twice in one chunk: one row at a time keeps "later wins".
            for item in chunk {
                let done =
                    upsert_transaction_chunk(tx, account_id, std::slice::from_ref(item), now);
                outcomes.extend(done.await?);
            }
        } else {
            outcomes.extend(upsert_transaction_chunk(tx, account_id, chunk, now).await?);
        }
    }
    Ok(outcomes)
}

const REWRITE_TRANSACTION: &str = "DO UPDATE SET \
     transaction_type = excluded.transaction_type, subtype = excluded.subtype, \
     status = excluded.status, amount = excluded.amount, currency = excluded.currency, \
     description = excluded.description, symbol = excluded.symbol, \
     security_name = excluded.security_name, quantity = excluded.quantity, \
     unit_price = excluded.unit_price, commission = excluded.commission, \
     transaction_date = excluded.transaction_date, settlement_date = excluded.settlement_date, \
     updated_at = excluded.updated_at";

/// Writes `rows` (fresh id and item) in one statement; `conflict` says what a row that exists
/// already gets. The provider id and id of each row written.
async fn write_transactions(
    tx: &mut Tx,
    account_id: Uuid,
    rows: &[(Uuid, &NewTransaction)],
    now: DateTime<Utc>,
    conflict: &str,
) -> Result<HashMap<String, Uuid>, StoreError> {
    if rows.is_empty() {
        return Ok(HashMap::new());
    }
    // SQLite binds QueryBuilder's anonymous `?` in order; numbered `$n` would be looked up by a
    // linear scan each, which makes thousands of them quadratic.
    let mut insert = QueryBuilder::<Db>::new(
        "INSERT INTO transactions (id, account_id, provider_transaction_id, transaction_type, \
         subtype, status, amount, currency, description, symbol, security_name, quantity, \
         unit_price, commission, transaction_date, settlement_date, created_at, updated_at) ",
    );
    insert.push_values(rows, |mut row, (id, item)| {
        row.push_bind(*id)
            .push_bind(account_id)
            .push_bind(item.provider_transaction_id.as_str())
            .push_bind(item.transaction_type.as_str())
            .push_bind(item.subtype.as_deref())
            .push_bind(item.status.as_str())
            .push_bind(text(item.amount))
            .push_bind(currency(&item.currency))
            .push_bind(item.description.as_deref())
            .push_bind(item.symbol.as_deref())
            .push_bind(item.security_name.as_deref())
            .push_bind(optional_text(item.quantity))
            .push_bind(optional_text(item.unit_price))
            .push_bind(optional_text(item.commission))
            .push_bind(item.transaction_date)
            .push_bind(item.settlement_date)
            .push_bind(now)
            .push_bind(now);
    });
    insert
        .push(" ON CONFLICT (account_id, provider_transaction_id) ")
        .push(conflict)
        .push(" RETURNING provider_transaction_id, id");
    let written: Vec<(String, Uuid)> = insert.build_query_as().fetch_all(&mut **tx).await?;
    Ok(written.into_iter().collect())
}

/// Inserts the rows that are new, reads the others, and rewrites those that changed (and any
/// that another writer removed meanwhile). Provider ids must be distinct within `chunk`.
async fn upsert_transaction_chunk(
    tx: &mut Tx,
    account_id: Uuid,
    chunk: &[NewTransaction],
    now: DateTime<Utc>,
) -> Result<Vec<(Uuid, Upserted)>, StoreError> {
    let fresh: Vec<(Uuid, &NewTransaction)> =
        chunk.iter().map(|item| (Uuid::now_v7(), item)).collect();
    let inserted = write_transactions(tx, account_id, &fresh, now, "DO NOTHING").await?;
    let mut lookup = QueryBuilder::<Db>::new(SELECT_TRANSACTION);
    lookup
        .push(" FROM transactions t WHERE t.account_id = ")
        .push_bind(account_id)
        .push(" AND t.provider_transaction_id IN (");
    let mut listed = lookup.separated(", ");
    for (_, item) in &fresh {
        if !inserted.contains_key(&item.provider_transaction_id) {
            listed.push_bind(item.provider_transaction_id.as_str());
        }
    }
    lookup.push(")");
    let mut existing = HashMap::new();
    if inserted.len() < fresh.len() {
        let rows: Vec<TransactionRecord> = lookup.build_query_as().fetch_all(&mut **tx).await?;
        for record in rows {
            existing.insert(record.provider_transaction_id.clone(), record);
        }
    }
    let changed: Vec<(Uuid, &NewTransaction)> = fresh
        .iter()
        .filter(|(_, item)| {
            let key = &item.provider_transaction_id;
            !inserted.contains_key(key)
                && existing
                    .get(key)
                    .is_none_or(|stored| !transaction_matches(stored, item))
        })
        .copied()
        .collect();
    let rewritten_ids =
        write_transactions(tx, account_id, &changed, now, REWRITE_TRANSACTION).await?;
    let outcome = |(fresh_id, item): &(Uuid, &NewTransaction)| {
        let key = &item.provider_transaction_id;
        if inserted.contains_key(key) {
            (*fresh_id, Upserted::Created)
        } else if let Some(id) = rewritten_ids.get(key) {
            rewritten(*fresh_id, Some(*id))
        } else {
            let stored = existing.get(key).map_or(*fresh_id, |stored| stored.id);
            (stored, Upserted::Unchanged)
        }
    };
    Ok(fresh.iter().map(outcome).collect())
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

/// Inserts (or, with an `ON CONFLICT ... DO UPDATE` clause as `conflict`, rewrites) one
/// holding, active; the id of the row written, if any.
async fn write_holding(
    tx: &mut Tx,
    account_id: Uuid,
    item: &NewHolding,
    (id, currency): (Uuid, &str),
    now: DateTime<Utc>,
    conflict: &str,
) -> Result<Option<Uuid>, StoreError> {
    let sql = format!(
        "INSERT INTO holdings (id, account_id, provider_holding_id, symbol, security_name, \
         asset_type, quantity, cost_basis, market_value, currency, average_price, \
         current_price, unrealized_gain_loss, is_active, last_synced_at, created_at, \
         updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15, $15) \
         ON CONFLICT (account_id, provider_holding_id) {conflict} RETURNING id"
    );
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(account_id)
        .bind(&item.provider_holding_id)
        .bind(&item.symbol)
        .bind(item.security_name.as_deref())
        .bind(item.asset_type.as_str())
        .bind(text(item.quantity))
        .bind(optional_text(item.cost_basis))
        .bind(text(item.market_value))
        .bind(currency)
        .bind(optional_text(item.average_price))
        .bind(optional_text(item.current_price))
        .bind(optional_text(item.unrealized_gain_loss))
        .bind(true)
        .bind(now)
        .fetch_optional(&mut **tx)
        .await?)
}

const REWRITE_HOLDING: &str = "DO UPDATE SET symbol = excluded.symbol, \
     security_name = excluded.security_name, asset_type = excluded.asset_type, \
     quantity = excluded.quantity, cost_basis = excluded.cost_basis, \
     market_value = excluded.market_value, currency = excluded.currency, \
     average_price = excluded.average_price, current_price = excluded.current_price, \
     unrealized_gain_loss = excluded.unrealized_gain_loss, is_active = excluded.is_active, \
     last_synced_at = excluded.last_synced_at, updated_at = excluded.updated_at";

pub(super) async fn upsert_holding_in(
    tx: &mut Tx,
    account_id: Uuid,
    item: &NewHolding,
    now: DateTime<Utc>,
) -> Result<(Uuid, Upserted), StoreError> {
    let currency = currency(&item.currency);
    let row = (Uuid::now_v7(), currency.as_str());
    if let Some(id) = write_holding(tx, account_id, item, row, now, "DO NOTHING").await? {
        return Ok((id, Upserted::Created));
    }
    let sql = format!(
        "{SELECT_HOLDING} FROM holdings h WHERE h.account_id = $1 AND h.provider_holding_id = $2"
    );
    let existing: Option<HoldingRecord> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(account_id)
        .bind(&item.provider_holding_id)
        .fetch_optional(&mut **tx)
        .await?;
    if let Some(existing) = existing.filter(|existing| {
        existing.symbol == item.symbol
            && existing.security_name == item.security_name
            && existing.asset_type == item.asset_type
            && existing.quantity == item.quantity
            && existing.cost_basis == item.cost_basis
            && existing.market_value == item.market_value
            && existing.currency == currency
            && existing.average_price == item.average_price
            && existing.current_price == item.current_price
            && existing.unrealized_gain_loss == item.unrealized_gain_loss
            && existing.is_active
    }) {
        sqlx::query("UPDATE holdings SET last_synced_at = $2 WHERE id = $1")
            .bind(existing.id)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        return Ok((existing.id, Upserted::Unchanged));
    }
    let written = write_holding(tx, account_id, item, row, now, REWRITE_HOLDING).await?;
    Ok(rewritten(row.0, written))
}
