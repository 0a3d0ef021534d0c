//! Erasure and export of a user's own data, on both SQL backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{NewUserErasure, USER_TABLES, UserDataStore, UserErasureRecord};
use crate::events::Event;
use crate::store::backend::{Backend, QueryBuilder, SqlStore, query, query_as, query_scalar};
use crate::store::events::sql::insert_events;
use crate::store::records::sql::{
    SELECT_ACCOUNT, SELECT_HOLDING, SELECT_SNAPSHOT, SELECT_TRANSACTION,
};
use crate::store::users::sql::SELECT_USER;
use crate::store::{
    AccountRecord, HoldingRecord, SnapshotRecord, StoreError, TransactionPosition,
    TransactionRecord, UserRecord,
};

/// The condition "`$column` is the id of one of the user's accounts", for the per-account
/// exports.
fn push_user_account<B: Backend>(
    query: &mut QueryBuilder<B>,
    column: &str,
    user_id: Uuid,
    account_id: Uuid,
) {
    query
        .push(format!(
            " WHERE {column} = (SELECT a.id FROM accounts a JOIN connections c "
        ))
        .push("ON c.id = a.connection_id WHERE a.id = ")
        .push_bind(account_id)
        .push(" AND c.user_id = ")
        .push_bind(user_id)
        .push(")");
}

#[async_trait]
impl<B: Backend> UserDataStore for SqlStore<B> {
    async fn begin_user_erasure(
        &self,
        erasure: &NewUserErasure,
        events: &[Event],
    ) -> Result<Option<UserRecord>, StoreError> {
        let user_id = erasure.user_id;
        let at = erasure.requested_at;
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let user: Option<UserRecord> =
            query_as::<B, _>(sqlx::AssertSqlSafe(format!("{SELECT_USER} WHERE id = $1")))
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(user) = user else {
            return Ok(None);
        };
        // The record first: of two concurrent requests exactly one inserts it.
        let begun = query::<B>(
            "INSERT INTO user_erasures (user_id, requested_at, requested_by, deleted_rows) \
             VALUES ($1, $2, $3, 0) ON CONFLICT (user_id) DO NOTHING",
        )
        .bind(user_id)
        .bind(at)
        .bind(erasure.requested_by)
        .execute(&mut *tx)
        .await?;
        if begun.rows_affected() == 0 {
            return Ok(None);
        }
        // No email or password hash stays: the normalized email becomes a value no email
        // normalizes to (it has no `@`), so the address can register again at once.
        query::<B>(
            "UPDATE users SET email = '', email_normalized = $2, password_hash = '', \
             email_verified_at = NULL, min_token_version = min_token_version + 1, \
             updated_at = $3 WHERE id = $1",
        )
        .bind(user_id)
        .bind(format!("erased:{user_id}"))
        .bind(at)
        .execute(&mut *tx)
        .await?;
        query::<B>(
            "UPDATE sessions SET revoked_at = $2, revoked_reason = 'account_deleted' \
             WHERE user_id = $1 AND revoked_at IS NULL",
        )
        .bind(user_id)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        query::<B>(
            "UPDATE refresh_tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL",
        )
        .bind(user_id)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        query::<B>("DELETE FROM user_roles WHERE user_id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        insert_events(&mut tx, events).await?;
        tx.commit().await?;
        Ok(Some(user))
    }

    async fn claim_user_erasure(
        &self,
        user_id: Option<Uuid>,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<Uuid>, StoreError> {
        // One statement, like the job leases: PostgreSQL re-checks the WHERE clause against
        // the latest row version after waiting for a concurrent writer, SQLite serializes
        // writers, so at most one caller sees the row come back.
        let claimed: Option<Uuid> = query_scalar::<B, _>(
            "UPDATE user_erasures SET lease_owner = $1, lease_until = $2 \
             WHERE finished_at IS NULL \
             AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until <= $3 \
                  OR lease_owner = $1) \
             AND user_id = (SELECT user_id FROM user_erasures WHERE finished_at IS NULL \
                  AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until <= $3 \
                       OR lease_owner = $1) \
                  AND ($4 IS NULL OR user_id = $4) \
                  ORDER BY requested_at, user_id LIMIT 1) \
             RETURNING user_id",
        )
        .bind(owner)
        .bind(lease_until)
        .bind(now)
        .bind(user_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(claimed)
    }

    async fn erase_user_batch(
        &self,
        user_id: Uuid,
        owner: &str,
        limit: u32,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<u64>, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let leased = query::<B>(
            "UPDATE user_erasures SET lease_until = $3 \
             WHERE user_id = $1 AND lease_owner = $2 AND finished_at IS NULL",
        )
        .bind(user_id)
        .bind(owner)
        .bind(lease_until)
        .execute(&mut *tx)
        .await?;
        if leased.rows_affected() == 0 {
            return Ok(None);
        }
        for table in USER_TABLES {
            let deleted = query::<B>(table.erase_batch)
                .bind(user_id)
                .bind(i64::from(limit))
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if deleted > 0 {
                query::<B>(
                    "UPDATE user_erasures SET deleted_rows = deleted_rows + $2 WHERE user_id = $1",
                )
                .bind(user_id)
                .bind(i64::try_from(deleted).unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                return Ok(Some(deleted));
            }
        }
        tx.commit().await?;
        Ok(Some(0))
    }

    async fn finish_user_erasure(
        &self,
        user_id: Uuid,
        owner: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let finished = query::<B>(
            "UPDATE user_erasures SET finished_at = $3, lease_owner = NULL, lease_until = NULL \
             WHERE user_id = $1 AND lease_owner = $2 AND finished_at IS NULL",
        )
        .bind(user_id)
        .bind(owner)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        if finished.rows_affected() == 0 {
            return Ok(false);
        }
        query::<B>("DELETE FROM users WHERE id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn user_erasure(&self, user_id: Uuid) -> Result<Option<UserErasureRecord>, StoreError> {
        Ok(query_as::<B, _>(
            "SELECT user_id, requested_at, requested_by, deleted_rows, finished_at \
             FROM user_erasures WHERE user_id = $1",
        )
        .bind(user_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn users_erased_since(&self, since: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        Ok(
            query_scalar::<B, _>("SELECT user_id FROM user_erasures WHERE requested_at >= $1")
                .bind(since)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    async fn export_accounts(
        &self,
        user_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<AccountRecord>, StoreError> {
        let mut query = QueryBuilder::<B>::new(SELECT_ACCOUNT);
        query
            .push(
                " FROM accounts a JOIN connections c ON c.id = a.connection_id WHERE c.user_id = ",
            )
            .push_bind(user_id);
        if let Some(after) = after {
            query.push(" AND a.id > ").push_bind(after);
        }
        query
            .push(" ORDER BY a.id LIMIT ")
            .push_bind(i64::from(limit));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn export_transactions(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        after: Option<TransactionPosition>,
        limit: u32,
    ) -> Result<Vec<TransactionRecord>, StoreError> {
        let mut query = QueryBuilder::<B>::new(SELECT_TRANSACTION);
        query.push(" FROM transactions t");
        push_user_account(&mut query, "t.account_id", user_id, account_id);
        // A row comparison: both databases read it as a range of the (account_id,
        // transaction_date, id) index, so each page starts where the last ended instead of
        // scanning the account's rows from its first (PostgreSQL does not derive that range
        // from the spelled-out OR).
        if let Some(after) = after {
            query
                .push(" AND (t.transaction_date, t.id) > (")
                .push_bind(after.transaction_date)
                .push(", ")
                .push_bind(after.id)
                .push(")");
        }
        query
            .push(" ORDER BY t.transaction_date, t.id LIMIT ")
            .push_bind(i64::from(limit));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn export_holdings(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<HoldingRecord>, StoreError> {
        let mut query = QueryBuilder::<B>::new(SELECT_HOLDING);
        query.push(" FROM holdings h");
        push_user_account(&mut query, "h.account_id", user_id, account_id);
        if let Some(after) = after {
            query.push(" AND h.id > ").push_bind(after);
        }
        query
            .push(" ORDER BY h.id LIMIT ")
            .push_bind(i64::from(limit));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn export_snapshots(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<SnapshotRecord>, StoreError> {
        let mut query = QueryBuilder::<B>::new(SELECT_SNAPSHOT);
        query.push(" FROM balance_snapshots s");
        push_user_account(&mut query, "s.account_id", user_id, account_id);
        if let Some(after) = after {
            query.push(" AND s.id > ").push_bind(after);
        }
        query
            .push(" ORDER BY s.id LIMIT ")
            .push_bind(i64::from(limit));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }
}
