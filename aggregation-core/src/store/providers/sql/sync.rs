//! Provider syncs on SQL: many records written as one transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, SqlStore, Tx, query_as};
use crate::store::events::sql::insert_events;
use crate::store::records::sql::connections::mark_synced;
use crate::store::records::sql::reconcile::{Origin, write_transactions_in};
use crate::store::records::sql::upserts::{
    account_in, check_account_limit, delete_missing_pending_in, upsert_in,
};
use crate::store::records::sql::{deactivate_missing_holdings_in, insert_snapshot_in};
use crate::store::sql::tally;
use crate::store::{
    NewSnapshot, StoreError, SyncAccountData, SyncBatch, SyncCounts, SyncStore, TransactionSource,
};

/// Writes one account's part of a sync batch.
async fn sync_account<B: Backend>(
    tx: &mut Tx<B>,
    (user_id, connection_id): (Uuid, Uuid),
    origin: Origin<'_>,
    item: &SyncAccountData,
    now: DateTime<Utc>,
    counts: &mut SyncCounts,
) -> Result<(), StoreError> {
    let Some(account) = account_in(tx, connection_id, &item.provider_account_id).await? else {
        return Err(StoreError::Other(format!(
            "unknown account {:?} in connection {connection_id}",
            item.provider_account_id
        )));
    };
    if let Some(transactions) = &item.transactions {
        let done = write_transactions_in(
            tx,
            user_id,
            account.id,
            transactions,
            origin,
            item.pending_window,
            now,
        )
        .await?;
        tally(&mut counts.transactions, done.outcomes);
        counts.transactions_matched += done.matched;
        counts.transactions_booked += done.booked;
        counts.transfers += done.transfers;
        counts.matches.extend(done.matches);
        if let Some(window) = item.pending_window {
            let keep: Vec<&str> = transactions
                .iter()
                .map(|transaction| transaction.provider_transaction_id.as_str())
                .collect();
            counts.transactions_removed +=
                delete_missing_pending_in(tx, account.id, &keep, window).await?;
        }
    }
    if let Some(holdings) = &item.holdings {
        tally(
            &mut counts.holdings,
            upsert_in(tx, account.id, holdings, now).await?,
        );
        let keep: Vec<String> = holdings
            .iter()
            .map(|holding| holding.provider_holding_id.clone())
            .collect();
        counts.holdings_deactivated +=
            deactivate_missing_holdings_in::<B, _>(&mut **tx, account.id, &keep, now).await?;
    }
    if let Some(snapshot) = &item.snapshot {
        let snapshot = NewSnapshot {
            account_id: account.id,
            balance: account.balance_amount,
            available_balance: account.available_balance_amount,
            holdings_value: snapshot.holdings_value,
            cash_value: snapshot.cash_value,
            currency: account.currency.clone(),
            source: snapshot.source,
            captured_at: now,
        };
        insert_snapshot_in(tx, &snapshot).await?;
        counts.snapshots_created += 1;
    }
    Ok(())
}

#[async_trait]
impl<B: Backend> SyncStore for SqlStore<B> {
    async fn apply_sync(
        &self,
        connection_id: Uuid,
        batch: &SyncBatch,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, SyncCounts>,
        raised: &mut Vec<Event>,
    ) -> Result<SyncCounts, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // Locks the connection's row (PostgreSQL) so syncs of one connection are applied one
        // after the other; SQLite's BEGIN IMMEDIATE serializes writers.
        let owner: Option<(Uuid, String)> = query_as::<B, _>(
            "UPDATE connections SET updated_at = updated_at WHERE id = $1 \
             RETURNING user_id, provider_slug",
        )
        .bind(connection_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((user_id, provider_slug)) = owner else {
            return Err(StoreError::Other(format!(
                "unknown connection {connection_id}"
            )));
        };
        let mut counts = SyncCounts::default();
        let accounts = upsert_in(&mut tx, connection_id, &batch.accounts, now).await?;
        tally(&mut counts.accounts, accounts);
        if let Some(limit) = batch.account_limit
            && counts.accounts.created > 0
        {
            check_account_limit(&mut tx, user_id, limit).await?;
        }
        let origin = Origin {
            source: TransactionSource::Sync,
            name: &provider_slug,
        };
        for item in &batch.per_account {
            sync_account(
                &mut tx,
                (user_id, connection_id),
                origin,
                item,
                now,
                &mut counts,
            )
            .await?;
        }
        if batch.mark_synced {
            mark_synced(&mut tx, connection_id, now).await?;
        }
        let events = raise(&counts);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(counts)
    }
}
