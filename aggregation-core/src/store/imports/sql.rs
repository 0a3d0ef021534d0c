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
use crate::store::records::sql::upserts::{
    account_in, upsert_in, upsert_one, upsert_transactions_in,
};
use crate::store::sql::{OptionalDec, Upserted};
use crate::store::{
    FILE_IMPORT_PROVIDER, ImportAccount, ImportBatch, ImportCounts, ImportSnapshot, ImportStore,
    NewSnapshot, SnapshotSource, StoreError,
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

/// Writes one account of an import with its transactions, holdings and snapshot.
async fn import_account<B: Backend>(
    tx: &mut Tx<B>,
    connection_id: Uuid,
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
    let (account_id, outcome) = upsert_one(tx, connection_id, &*account, now).await?;
    match outcome {
        Upserted::Created => counts.accounts_created += 1,
        Upserted::Updated => counts.accounts_updated += 1,
        Upserted::Unchanged => counts.accounts_unchanged += 1,
    }
    for (_, outcome) in upsert_transactions_in(tx, account_id, &item.transactions, now).await? {
        match outcome {
            Upserted::Created => counts.transactions_created += 1,
            Upserted::Updated => counts.transactions_updated += 1,
            Upserted::Unchanged => counts.transactions_skipped += 1,
        }
    }
    for (_, outcome) in upsert_in(tx, account_id, &item.holdings, now).await? {
        match outcome {
            Upserted::Created => counts.holdings_created += 1,
            Upserted::Updated => counts.holdings_updated += 1,
            Upserted::Unchanged => counts.holdings_unchanged += 1,
        }
    }
    if let Some(snapshot) = &item.snapshot
        && !has_import_snapshot(tx, account_id, snapshot).await?
    {
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
        counts.snapshots_created += 1;
    }
    Ok(())
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
        let mut counts = ImportCounts::default();
        for institution in &batch.institutions {
            let alias = Some(institution.alias.as_str());
            let connection =
                find_or_create_connection_in(&mut tx, user_id, FILE_IMPORT_PROVIDER, alias, now)
                    .await?;
            counts.connection_ids.push(connection.id);
            for item in &institution.accounts {
                import_account(&mut tx, connection.id, item, now, &mut counts).await?;
            }
            mark_synced(&mut tx, connection.id, now).await?;
        }
        let events = raise(&counts);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(counts)
    }
}
