//! Provider syncs on SQL: cursors, webhook keys, and the change-feed writes the batch writer
//! ([`crate::store::BatchStore`]) makes for a provider's part of a batch.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::Event;
use crate::store::backend::{Backend, SqlStore, Tx, query, query_as};
use crate::store::events::sql::insert_events;
use crate::store::records::sql::connections::CONNECTION_COLUMNS;
use crate::store::{ConnectionRecord, StoreError, SyncStore};

#[async_trait]
impl<B: Backend> SyncStore for SqlStore<B> {
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

/// Deletes the rows a change feed removed from the connection's accounts (by account and
/// provider id, or by provider id in any of its accounts), keeping each account's
/// transaction count. How many were deleted.
pub(in crate::store) async fn delete_removed_in<B: Backend>(
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

/// Stores the cursor a change feed's next sync goes on from.
pub(in crate::store) async fn store_cursor_in<B: Backend>(
    tx: &mut Tx<B>,
    connection_id: Uuid,
    cursor: &str,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    query::<B>(
        "INSERT INTO provider_cursors (connection_id, cursor, updated_at) \
         VALUES ($1, $2, $3) ON CONFLICT (connection_id) DO UPDATE \
         SET cursor = excluded.cursor, updated_at = excluded.updated_at",
    )
    .bind(connection_id)
    .bind(cursor)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
