//! File imports on SQL: many records written as one transaction.

use std::borrow::Cow;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, SqlStore, Tx, query_as};
use crate::store::events::sql::insert_events;
use crate::store::records::sql::connections::{find_or_create_connection_in, mark_synced};
use crate::store::records::sql::insert_snapshot_in;
use crate::store::records::sql::reconcile::{Origin, write_transactions_in};
use crate::store::records::sql::upserts::{account_in, check_account_limit, upsert_in, upsert_one};
use crate::store::sql::{OptionalDec, Upserted};
use crate::store::{
    FILE_IMPORT_PROVIDER, ImportAccount, ImportBatch, ImportCounts, ImportOutcome, ImportSnapshot,
    ImportStore, ImportedAccount, NewSnapshot, SnapshotSource, StoreError, TransactionSource,
};

/// Whether the account has a `file_import` snapshot captured at the same instant with the same
/// figures.
async fn has_import_snapshot<B: Backend>(
    tx: &mut Tx<B>,
    account_id: Uuid,
    snapshot: &ImportSnapshot,
) -> Result<bool, StoreError> {
    let stored: Vec<(
        crate::store::sql::Dec,
        OptionalDec,
        OptionalDec,
        OptionalDec,
    )> = query_as::<B, _>(
        "SELECT balance, available_balance, holdings_value, cash_value \
             FROM balance_snapshots WHERE account_id = $1 AND source = $2 AND captured_at = $3",
    )
    .bind(account_id)
    .bind(SnapshotSource::FileImport.as_str())
    .bind(snapshot.captured_at)
    .fetch_all(&mut **tx)
    .await?;
    Ok(stored
        .into_iter()
        .any(|(balance, available, holdings, cash)| {
            Decimal::from(balance) == snapshot.balance
                && Option::<Decimal>::from(available) == snapshot.available_balance
                && Option::<Decimal>::from(holdings) == snapshot.holdings_value
                && Option::<Decimal>::from(cash) == snapshot.cash_value
        }))
}

fn outcome(upserted: &Upserted) -> ImportOutcome {
    match upserted {
        Upserted::Created => ImportOutcome::Created,
        Upserted::Updated => ImportOutcome::Updated,
        Upserted::Unchanged => ImportOutcome::Unchanged,
    }
}

/// Writes one account of an import with its transactions, holdings and snapshots.
async fn import_account<B: Backend>(
    tx: &mut Tx<B>,
    (user_id, connection_id): (Uuid, Uuid),
    origin: Origin<'_>,
    item: &ImportAccount,
    now: DateTime<Utc>,
    counts: &mut ImportCounts,
) -> Result<(), StoreError> {
    let mut account = Cow::Borrowed(&item.account);
    if !item.balance_reported {
        // A file without a balance keeps the stored one.
        if let Some(stored) = account_in(tx, connection_id, &account.provider_account_id).await? {
            let account = account.to_mut();
            account.balance_amount = stored.balance_amount;
            account.available_balance_amount = stored.available_balance_amount;
        }
    }
    let (account_id, upserted) = upsert_one(tx, connection_id, &*account, now).await?;
    let mut done = ImportedAccount {
        account_id,
        provider_account_id: account.provider_account_id.clone(),
        outcome: outcome(&upserted),
        transactions_created: 0,
        transactions_updated: 0,
        transactions_skipped: 0,
        holdings_created: 0,
        holdings_updated: 0,
        snapshots_created: 0,
    };
    let reconciled = write_transactions_in(
        tx,
        user_id,
        account_id,
        &item.transactions,
        origin,
        None,
        now,
    )
    .await?;
    counts.transactions_matched += reconciled.matched;
    counts.transfers += reconciled.transfers;
    counts.matches.extend(reconciled.matches);
    for (_, upserted) in reconciled.outcomes {
        match upserted {
            Upserted::Created => done.transactions_created += 1,
            Upserted::Updated => done.transactions_updated += 1,
            Upserted::Unchanged => done.transactions_skipped += 1,
        }
    }
    let mut holdings_unchanged = 0;
    for (_, upserted) in upsert_in(tx, account_id, &item.holdings, now).await? {
        match upserted {
            Upserted::Created => done.holdings_created += 1,
            Upserted::Updated => done.holdings_updated += 1,
            Upserted::Unchanged => holdings_unchanged += 1,
        }
    }
    for snapshot in &item.snapshots {
        if has_import_snapshot(tx, account_id, snapshot).await? {
            continue;
        }
        let snapshot = NewSnapshot {
            account_id,
            balance: snapshot.balance,
            available_balance: snapshot.available_balance,
            holdings_value: snapshot.holdings_value,
            cash_value: snapshot.cash_value,
            currency: account.currency.clone(),
            source: SnapshotSource::FileImport,
            captured_at: snapshot.captured_at,
        };
        insert_snapshot_in(tx, &snapshot).await?;
        done.snapshots_created += 1;
    }
    match upserted {
        Upserted::Created => counts.accounts_created += 1,
        Upserted::Updated => counts.accounts_updated += 1,
        Upserted::Unchanged => counts.accounts_unchanged += 1,
    }
    counts.transactions_created += done.transactions_created;
    counts.transactions_updated += done.transactions_updated;
    counts.transactions_skipped += done.transactions_skipped;
    counts.holdings_created += done.holdings_created;
    counts.holdings_updated += done.holdings_updated;
    counts.holdings_unchanged += holdings_unchanged;
    counts.snapshots_created += done.snapshots_created;
    counts.accounts.push(done);
    Ok(())
}

/// Whether the user owns the connection, and whether it is a `file_import` one.
async fn own_connection<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    connection_id: Uuid,
) -> Result<bool, StoreError> {
    let found: Option<(String,)> =
        query_as::<B, _>("SELECT provider_slug FROM connections WHERE id = $1 AND user_id = $2")
            .bind(connection_id)
            .bind(user_id)
            .fetch_optional(&mut **tx)
            .await?;
    match found {
        Some((slug,)) => Ok(slug == FILE_IMPORT_PROVIDER),
        None => Err(StoreError::Conflict(
            "the connection to import into no longer exists".to_owned(),
        )),
    }
}

/// Writes the whole batch in `tx`; the caller commits or rolls back.
async fn write_batch<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    batch: &ImportBatch,
    now: DateTime<Utc>,
) -> Result<ImportCounts, StoreError> {
    let mut counts = ImportCounts::default();
    for institution in &batch.institutions {
        let (connection_id, file_import) = match institution.connection_id {
            Some(connection_id) => (
                connection_id,
                own_connection(tx, user_id, connection_id).await?,
            ),
            None => {
                let alias = Some(institution.alias.as_str());
                let connection =
                    find_or_create_connection_in(tx, user_id, FILE_IMPORT_PROVIDER, alias, now)
                        .await?;
                (connection.id, true)
            }
        };
        counts.connection_ids.push(connection_id);
        let origin = Origin {
            source: TransactionSource::Import,
            name: batch.origin.as_deref().unwrap_or(FILE_IMPORT_PROVIDER),
        };
        for item in &institution.accounts {
            import_account(tx, (user_id, connection_id), origin, item, now, &mut counts).await?;
        }
        // A provider's connection keeps its own sync time (its sync limits go by it).
        if file_import {
            mark_synced(tx, connection_id, now).await?;
        }
    }
    if let Some(limit) = batch.account_limit
        && counts.accounts_created > 0
    {
        check_account_limit(tx, user_id, limit).await?;
    }
    Ok(counts)
}

#[async_trait]
impl<B: Backend> ImportStore for SqlStore<B> {
    async fn apply_import(
        &self,
        user_id: Uuid,
        batch: &ImportBatch,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, ImportCounts>,
        raised: &mut Vec<Event>,
    ) -> Result<ImportCounts, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let counts = write_batch(&mut tx, user_id, batch, now).await?;
        let events = raise(&counts);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(counts)
    }

    async fn preview_import(
        &self,
        user_id: Uuid,
        batch: &ImportBatch,
        now: DateTime<Utc>,
    ) -> Result<ImportCounts, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let counts = write_batch(&mut tx, user_id, batch, now).await?;
        tx.rollback().await?;
        Ok(counts)
    }
}
