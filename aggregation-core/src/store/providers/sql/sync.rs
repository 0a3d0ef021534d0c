//! Provider syncs on SQL: many records written as one transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, SqlStore, Tx, query, query_as};
use crate::store::events::sql::insert_events;
use crate::store::records::sql::connections::{CONNECTION_COLUMNS, mark_synced};
use crate::store::records::sql::reconcile::{Origin, write_transactions_in};
use crate::store::records::sql::upserts::{
    account_in, check_account_limit, delete_missing_pending_in, upsert_in,
};
use crate::store::records::sql::{deactivate_missing_holdings_in, insert_snapshot_in};
use crate::store::sql::tally;
use crate::store::{
    ConnectionRecord, NewSnapshot, ProviderEnrichment, StoreError, SyncAccountData, SyncBatch,
    SyncCounts, SyncStore, TransactionSource,
};

/// The window a change feed's batch hands the reconciler: empty, so a booked row takes over
/// a pending one only by the provider's link, never by the amount and date rule (a feed
/// carries only what changed, so a pending row absent from it has not disappeared).
const LINK_ONLY: (chrono::NaiveDate, chrono::NaiveDate) =
    (chrono::NaiveDate::MAX, chrono::NaiveDate::MIN);

/// Writes one account's part of a sync batch (`feed`: of a change feed's batch).
async fn sync_account<B: Backend>(
    tx: &mut Tx<B>,
    (user_id, connection_id): (Uuid, Uuid),
    origin: Origin<'_>,
    (item, feed): (&SyncAccountData, bool),
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
            if feed {
                Some(LINK_ONLY)
            } else {
                item.pending_window
            },
            now,
        )
        .await?;
        tally(&mut counts.transactions, done.outcomes);
        counts.transactions_matched += done.matched;
        counts.transactions_booked += done.booked;
        counts.transfers += done.transfers;
        counts.matches.extend(done.matches);
        if let Some(window) = item.pending_window.filter(|_| !feed) {
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
                (item, batch.feed.is_some()),
                now,
                &mut counts,
            )
            .await?;
        }
        if let Some(feed) = &batch.feed {
            enrich_from_provider_in(&mut tx, connection_id, &feed.enrichment).await?;
            counts.transactions_removed +=
                delete_removed_in(&mut tx, connection_id, &feed.removed).await?;
            query::<B>(
                "INSERT INTO provider_cursors (connection_id, cursor, updated_at) \
                 VALUES ($1, $2, $3) ON CONFLICT (connection_id) DO UPDATE \
                 SET cursor = excluded.cursor, updated_at = excluded.updated_at",
            )
            .bind(connection_id)
            .bind(feed.cursor.as_str())
            .bind(now)
            .execute(&mut *tx)
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

    async fn sync_cursor(&self, connection_id: Uuid) -> Result<Option<String>, StoreError> {
        let cursor: Option<(String,)> =
            query_as::<B, _>("SELECT cursor FROM provider_cursors WHERE connection_id = $1")
                .bind(connection_id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(cursor.map(|(cursor,)| cursor))
    }

    async fn set_webhook_key(
        &self,
        connection_id: Uuid,
        provider_slug: &str,
        key_digest: &[u8],
    ) -> Result<(), StoreError> {
        query::<B>(
            "INSERT INTO provider_webhook_keys (connection_id, provider_slug, key_digest) \
             VALUES ($1, $2, $3) ON CONFLICT (connection_id) DO UPDATE \
             SET provider_slug = excluded.provider_slug, key_digest = excluded.key_digest",
        )
        .bind(connection_id)
        .bind(provider_slug)
        .bind(key_digest)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn connection_by_webhook_key(
        &self,
        provider_slug: &str,
        key_digest: &[u8],
    ) -> Result<Option<ConnectionRecord>, StoreError> {
        let sql = format!(
            "SELECT {CONNECTION_COLUMNS} FROM connections WHERE id IN \
             (SELECT connection_id FROM provider_webhook_keys \
              WHERE provider_slug = $1 AND key_digest = $2) \
             AND status <> 'disconnected' ORDER BY updated_at DESC, id DESC LIMIT 1"
        );
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(provider_slug)
            .bind(key_digest)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn record_events(
        &self,
        events: &[Event],
        raised: &mut Vec<Event>,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        insert_events(&mut tx, events).await?;
        tx.commit().await?;
        raised.extend(events.iter().cloned());
        Ok(())
    }
}

/// Writes the provider's category and merchant name onto the rows a change feed upserted.
/// The provider's merchant name replaces the one derived from the description; its category
/// (when the taxonomy knows it) takes precedence over merchant and bank codes and transfer
/// pairing, never over the user's choice or a rule's. What the provider said is kept in
/// `provider_category` whatever else decides the category.
async fn enrich_from_provider_in<B: Backend>(
    tx: &mut Tx<B>,
    connection_id: Uuid,
    enrichment: &[ProviderEnrichment],
) -> Result<(), StoreError> {
    for row in enrichment {
        if row.category.is_none() && row.merchant_name.is_none() {
            continue;
        }
        let category = row
            .category
            .as_deref()
            .filter(|id| crate::enrich::taxonomy::category(id).is_some());
        let merchant_name = row
            .merchant_name
            .as_deref()
            .map(str::trim)
            .filter(|name| !name.is_empty());
        query::<B>(
            "UPDATE transactions SET \
             provider_category = COALESCE($1, provider_category), \
             merchant_name = CASE WHEN merchant_name_by_user OR $2 IS NULL \
                 THEN merchant_name ELSE $2 END, \
             category_source = CASE WHEN category_by_user OR $3 IS NULL \
                 OR category_source = 'rule' THEN category_source ELSE 'provider' END, \
             category = CASE WHEN category_by_user OR $3 IS NULL \
                 OR category_source = 'rule' THEN category ELSE $3 END \
             WHERE provider_transaction_id = $4 AND account_id = \
             (SELECT id FROM accounts WHERE connection_id = $5 AND provider_account_id = $6)",
        )
        .bind(row.category.as_deref())
        .bind(merchant_name)
        .bind(category)
        .bind(row.provider_transaction_id.as_str())
        .bind(connection_id)
        .bind(row.provider_account_id.as_str())
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Deletes the rows a change feed removed from the connection's accounts (by account and
/// provider id, or by provider id in any of its accounts), keeping each account's
/// transaction count. How many were deleted.
async fn delete_removed_in<B: Backend>(
    tx: &mut Tx<B>,
    connection_id: Uuid,
    removed: &[(Option<String>, String)],
) -> Result<u64, StoreError> {
    let mut deleted = 0;
    for (account, transaction) in removed {
        let accounts: Vec<(Uuid,)> =
            match account {
                Some(account) => query_as::<B, _>(
                    "DELETE FROM transactions WHERE provider_transaction_id = $1 AND account_id = \
                 (SELECT id FROM accounts WHERE connection_id = $2 AND provider_account_id = $3) \
                 RETURNING account_id",
                )
                .bind(transaction.as_str())
                .bind(connection_id)
                .bind(account.as_str())
                .fetch_all(&mut **tx)
                .await?,
                None => query_as::<B, _>(
                    "DELETE FROM transactions WHERE provider_transaction_id = $1 AND account_id IN \
                 (SELECT id FROM accounts WHERE connection_id = $2) RETURNING account_id",
                )
                .bind(transaction.as_str())
                .bind(connection_id)
                .fetch_all(&mut **tx)
                .await?,
            };
        for (account_id,) in accounts {
            query::<B>(
                "UPDATE accounts SET transaction_count = transaction_count - 1 \
                 WHERE id = $1 AND transaction_count > 0",
            )
            .bind(account_id)
            .execute(&mut **tx)
            .await?;
            deleted += 1;
        }
    }
    Ok(deleted)
}
