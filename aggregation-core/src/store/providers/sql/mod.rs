//! Provider connections: OAuth states, the connection lifecycle and credentials, and sync
//! cool-downs.

pub(in crate::store) mod sync;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, SqlStore, Tx, query, query_as, query_scalar};
use crate::store::events::sql::insert_events;
use crate::store::records::sql::connections::{
    CONNECTION_COLUMNS, insert_connection, live_connection_in, lock_user_in,
};
use crate::store::{
    ConnectionRecord, ConnectionStatus, ConnectionStore as _, EncryptedCredentials, NewConnection,
    NewOAuthState, OAuthStateRecord, ProviderConnectionStore, StoreError, SyncClaim, SyncKind,
};

/// The most one spend of a request budget adds, in microseconds.
const MAX_BUDGET_DEBT_MICROS: i64 = 1_000_000_000_000_000;

impl<B: Backend> SqlStore<B> {
    /// Active connections with credentials matching `condition` (over `$1`), in `order`, at
    /// most `$2`. The literal status and `IS NOT NULL` let the partial indexes of migration
    /// 0005 serve the look-up.
    async fn due_connections(
        &self,
        condition: &str,
        order: &str,
        bound: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<ConnectionRecord>, StoreError> {
        let sql = format!(
            "SELECT {CONNECTION_COLUMNS} FROM connections \
             WHERE status = 'active' AND encrypted_credentials IS NOT NULL \
             AND {condition} ORDER BY {order} LIMIT $2"
        );
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(bound)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?)
    }
}

/// Renews the credentials of one of the user's connections that is not disconnected: status
/// `active`, a new `connected_at`, its accounts kept. `None` when no such connection is there.
/// What a callback's save and a reauthorization's renewal share.
async fn renew_connection_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    connection_id: Uuid,
    credentials: &EncryptedCredentials,
    now: DateTime<Utc>,
) -> Result<Option<ConnectionRecord>, StoreError> {
    let sql = format!(
        "UPDATE connections SET status = $3, encrypted_credentials = $4, \
         credentials_key_id = $5, credentials_expires_at = $6, connected_at = $7, \
         updated_at = $7 WHERE id = $1 AND user_id = $2 AND status <> 'disconnected' \
         RETURNING {CONNECTION_COLUMNS}"
    );
    Ok(query_as::<B, ConnectionRecord>(sqlx::AssertSqlSafe(sql))
        .bind(connection_id)
        .bind(user_id)
        .bind(ConnectionStatus::Active.as_str())
        .bind(credentials.ciphertext.as_slice())
        .bind(&credentials.key_id)
        .bind(credentials.renew_at)
        .bind(now)
        .fetch_optional(&mut **tx)
        .await?)
}

#[async_trait]
impl<B: Backend> ProviderConnectionStore for SqlStore<B> {
    async fn insert_oauth_state(&self, state: &NewOAuthState) -> Result<(), StoreError> {
        query::<B>(
            "INSERT INTO oauth_states (state_digest, user_id, provider_slug, alias, \
             redirect_uri, encrypted_pkce_verifier, pkce_key_id, reauthorizes_connection_id, \
             created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(state.state_digest.as_slice())
        .bind(state.user_id)
        .bind(&state.provider_slug)
        .bind(state.alias.as_deref())
        .bind(&state.redirect_uri)
        .bind(state.encrypted_pkce_verifier.as_deref())
        .bind(state.pkce_key_id.as_deref())
        .bind(state.reauthorizes_connection_id)
        .bind(state.created_at)
        .bind(state.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn take_oauth_state(
        &self,
        state_digest: &[u8],
    ) -> Result<Option<OAuthStateRecord>, StoreError> {
        // One statement: of concurrent deletes of one row only one returns it.
        Ok(query_as::<B, _>(
            "DELETE FROM oauth_states WHERE state_digest = $1 RETURNING state_digest, user_id, \
             provider_slug, alias, redirect_uri, encrypted_pkce_verifier, pkce_key_id, \
             reauthorizes_connection_id, created_at, expires_at",
        )
        .bind(state_digest)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn connections_for_user(
        &self,
        user_id: Uuid,
        active_only: bool,
    ) -> Result<Vec<ConnectionRecord>, StoreError> {
        let filter = if active_only {
            " AND status = 'active'"
        } else {
            ""
        };
        let sql = format!(
            "SELECT {CONNECTION_COLUMNS} FROM connections WHERE user_id = $1{filter} \
             ORDER BY created_at DESC, id DESC"
        );
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .fetch_all(&self.pool)
            .await?)
    }

    async fn connection_by_id(
        &self,
        connection_id: Uuid,
    ) -> Result<Option<ConnectionRecord>, StoreError> {
        let sql = format!("SELECT {CONNECTION_COLUMNS} FROM connections WHERE id = $1");
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(connection_id)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn save_authorized_connection(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<&str>,
        new_id: Uuid,
        credentials_for: &(dyn Fn(Uuid) -> Result<EncryptedCredentials, StoreError> + Send + Sync),
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, (ConnectionRecord, bool)>,
        raised: &mut Vec<Event>,
    ) -> Result<(ConnectionRecord, bool), StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // The user lock makes concurrent callbacks for one slug and alias find one another's
        // connection instead of creating two.
        lock_user_in(&mut tx, user_id).await?;
        let Some(existing) = live_connection_in(&mut tx, user_id, provider_slug, alias).await?
        else {
            let credentials = credentials_for(new_id)?;
            let connection = NewConnection {
                id: new_id,
                user_id,
                provider_slug: provider_slug.to_owned(),
                alias: alias.map(str::to_owned),
                status: ConnectionStatus::Active,
                encrypted_credentials: Some(credentials.ciphertext),
                credentials_key_id: Some(credentials.key_id),
                credentials_expires_at: credentials.renew_at,
                created_at: now,
            };
            let saved = (insert_connection(&mut tx, &connection).await?, true);
            let events = raise(&saved);
            insert_events(&mut tx, &events).await?;
            tx.commit().await?;
            raised.extend(events);
            return Ok(saved);
        };
        let credentials = credentials_for(existing.id)?;
        let record = renew_connection_in(&mut tx, user_id, existing.id, &credentials, now)
            .await?
            .ok_or_else(|| {
                StoreError::Other("a live connection vanished under the user lock".into())
            })?;
        let saved = (record, false);
        let events = raise(&saved);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(saved)
    }

    async fn renew_authorized_connection(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        credentials_for: &(dyn Fn(Uuid) -> Result<EncryptedCredentials, StoreError> + Send + Sync),
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, (ConnectionRecord, bool)>,
        raised: &mut Vec<Event>,
    ) -> Result<Option<ConnectionRecord>, StoreError> {
        let credentials = credentials_for(connection_id)?;
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let Some(record) =
            renew_connection_in(&mut tx, user_id, connection_id, &credentials, now).await?
        else {
            return Ok(None);
        };
        let saved = (record, false);
        let events = raise(&saved);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(Some(saved.0))
    }

    async fn update_connection_alias(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        alias: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<ConnectionRecord>, StoreError> {
        // SET expressions read the row as it was, so the CASE sees the old alias.
        let sql = format!(
            "UPDATE connections SET alias = $3, updated_at = CASE \
             WHEN alias IS NOT DISTINCT FROM $3 THEN updated_at ELSE $4 END \
             WHERE id = $1 AND user_id = $2 RETURNING {CONNECTION_COLUMNS}"
        );
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(connection_id)
            .bind(user_id)
            .bind(alias)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn disconnect_connection(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, ConnectionRecord>,
        raised: &mut Vec<Event>,
    ) -> Result<Option<ConnectionRecord>, StoreError> {
        let sql = format!(
            "UPDATE connections SET status = 'disconnected', encrypted_credentials = NULL, \
             credentials_key_id = NULL, credentials_expires_at = NULL, updated_at = $3 \
             WHERE id = $1 AND user_id = $2 AND status <> 'disconnected' \
             RETURNING {CONNECTION_COLUMNS}"
        );
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let disconnected: Option<ConnectionRecord> = query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(connection_id)
            .bind(user_id)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(record) = disconnected {
            let events = raise(&record);
            insert_events(&mut tx, &events).await?;
            tx.commit().await?;
            raised.extend(events);
            return Ok(Some(record));
        }
        drop(tx);
        // Unknown, foreign, or disconnected already (a disconnected connection never changes
        // status again, so this read cannot miss a change).
        self.connection_for_user(user_id, connection_id).await
    }

    async fn replace_connection_credentials(
        &self,
        connection_id: Uuid,
        previous: &[u8],
        credentials: &EncryptedCredentials,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        // One statement: PostgreSQL re-checks the WHERE clause against the latest row version
        // after waiting for a concurrent writer, SQLite serializes writers. Every write of
        // credentials uses a fresh nonce, so an equal ciphertext means nobody wrote them
        // meanwhile. A connection expired from these very credentials (by a refusal that raced
        // this refresh on another instance) is active again: the refresh proved them good.
        let done = query::<B>(
            "UPDATE connections SET encrypted_credentials = $2, credentials_key_id = $3, \
             credentials_expires_at = $4, updated_at = $5, \
             status = CASE WHEN status = 'expired' THEN 'active' ELSE status END \
             WHERE id = $1 AND status <> 'disconnected' AND encrypted_credentials = $6",
        )
        .bind(connection_id)
        .bind(credentials.ciphertext.as_slice())
        .bind(&credentials.key_id)
        .bind(credentials.renew_at)
        .bind(now)
        .bind(previous)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn expire_connection_credentials(
        &self,
        connection_id: Uuid,
        previous: &[u8],
        now: DateTime<Utc>,
        events: &[Event],
        raised: &mut Vec<Event>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let expired: Option<Uuid> = query_scalar::<B, _>(
            "UPDATE connections SET status = 'expired', updated_at = $2 \
             WHERE id = $1 AND status = 'active' AND encrypted_credentials = $3 \
             RETURNING id",
        )
        .bind(connection_id)
        .bind(now)
        .bind(previous)
        .fetch_optional(&mut *tx)
        .await?;
        if expired.is_none() {
            return Ok(false);
        }
        insert_events(&mut tx, events).await?;
        tx.commit().await?;
        raised.extend_from_slice(events);
        Ok(true)
    }

    async fn revoke_connection(
        &self,
        connection_id: Uuid,
        now: DateTime<Utc>,
        events: &[Event],
        raised: &mut Vec<Event>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let revoked: Option<Uuid> = query_scalar::<B, _>(
            "UPDATE connections SET status = 'revoked', updated_at = $2 \
             WHERE id = $1 AND status NOT IN ('disconnected', 'revoked') RETURNING id",
        )
        .bind(connection_id)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        if revoked.is_none() {
            return Ok(false);
        }
        insert_events(&mut tx, events).await?;
        tx.commit().await?;
        raised.extend_from_slice(events);
        Ok(true)
    }

    async fn set_connection_status(
        &self,
        connection_id: Uuid,
        status: ConnectionStatus,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        // Disconnecting this way clears the credentials too, as `disconnect_connection` does,
        // so no disconnected row keeps them.
        let done = query::<B>(
            "UPDATE connections SET status = $2, \
             encrypted_credentials = CASE WHEN $3 THEN NULL ELSE encrypted_credentials END, \
             credentials_key_id = CASE WHEN $3 THEN NULL ELSE credentials_key_id END, \
             credentials_expires_at = CASE WHEN $3 THEN NULL ELSE credentials_expires_at END, \
             updated_at = CASE WHEN status = $2 THEN updated_at ELSE $4 END \
             WHERE id = $1 AND status <> 'disconnected'",
        )
        .bind(connection_id)
        .bind(status.as_str())
        .bind(status == ConnectionStatus::Disconnected)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn connections_due_for_token_refresh(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<ConnectionRecord>, StoreError> {
        let condition = "credentials_expires_at <= $1";
        let order = "credentials_expires_at, id";
        self.due_connections(condition, order, before, limit).await
    }

    async fn connections_due_for_sync(
        &self,
        synced_before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<ConnectionRecord>, StoreError> {
        let condition = "(last_sync_at IS NULL OR last_sync_at < $1)";
        let order = "last_sync_at NULLS FIRST, id";
        self.due_connections(condition, order, synced_before, limit)
            .await
    }

    async fn claim_sync(
        &self,
        subject_id: Uuid,
        kind: SyncKind,
        now: DateTime<Utc>,
        cooldown: chrono::TimeDelta,
        force: bool,
    ) -> Result<SyncClaim, StoreError> {
        let due_before = now.checked_sub_signed(cooldown).unwrap_or(now);
        // A refused claim reads the recorded start; when a concurrent release removed or moved
        // it meanwhile, claiming again settles it.
        for _ in 0..3 {
            // One statement: PostgreSQL re-checks the WHERE clause against the latest row
            // version after waiting for a concurrent claim, SQLite serializes writers; SET
            // reads the row as it was, so `previous_started_at` gets the start this claim
            // replaces.
            let granted: Option<Option<DateTime<Utc>>> = query_scalar::<B, _>(
                "INSERT INTO sync_claims (subject_id, kind, last_started_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (subject_id, kind) DO UPDATE SET \
                 previous_started_at = sync_claims.last_started_at, \
                 last_started_at = excluded.last_started_at \
                 WHERE $4 OR sync_claims.last_started_at <= $5 \
                 RETURNING previous_started_at",
            )
            .bind(subject_id)
            .bind(kind.as_str())
            .bind(now)
            .bind(force)
            .bind(due_before)
            .fetch_optional(&self.pool)
            .await?;
            if let Some(previous) = granted {
                return Ok(SyncClaim::Granted { previous });
            }
            let last: Option<DateTime<Utc>> = query_scalar::<B, _>(
                "SELECT last_started_at FROM sync_claims WHERE subject_id = $1 AND kind = $2",
            )
            .bind(subject_id)
            .bind(kind.as_str())
            .fetch_optional(&self.pool)
            .await?;
            if let Some(last) = last.filter(|last| *last > due_before) {
                let until = last.checked_add_signed(cooldown).unwrap_or(last);
                return Ok(SyncClaim::CoolingDown { until });
            }
        }
        Err(StoreError::Other(format!(
            "the {} sync claim of {subject_id} kept changing",
            kind.as_str()
        )))
    }

    async fn release_sync(
        &self,
        subject_id: Uuid,
        kind: SyncKind,
        claimed_at: DateTime<Utc>,
        previous: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        let query = match previous {
            Some(previous) => query::<B>(
                "UPDATE sync_claims SET last_started_at = $4, previous_started_at = NULL \
                 WHERE subject_id = $1 AND kind = $2 AND last_started_at = $3",
            )
            .bind(subject_id)
            .bind(kind.as_str())
            .bind(claimed_at)
            .bind(previous),
            None => query::<B>(
                "DELETE FROM sync_claims \
                 WHERE subject_id = $1 AND kind = $2 AND last_started_at = $3",
            )
            .bind(subject_id)
            .bind(kind.as_str())
            .bind(claimed_at),
        };
        query.execute(&self.pool).await?;
        Ok(())
    }

    async fn request_budget_paid_until(
        &self,
        connection_id: Uuid,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        let micros: Option<i64> = query_scalar::<B, _>(
            "SELECT paid_until_micros FROM provider_request_budgets WHERE connection_id = $1",
        )
        .bind(connection_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(micros.and_then(DateTime::from_timestamp_micros))
    }

    async fn spend_request_budget(
        &self,
        connection_id: Uuid,
        now: DateTime<Utc>,
        cost: chrono::TimeDelta,
    ) -> Result<(), StoreError> {
        // At most about 31 years of debt, so the sum never overflows a BIGINT.
        let cost = cost
            .num_microseconds()
            .unwrap_or(MAX_BUDGET_DEBT_MICROS)
            .clamp(0, MAX_BUDGET_DEBT_MICROS);
        // Microseconds as integers: the later-of and the sum are plain SQL on both backends,
        // so the spend is one statement (no read-modify-write race between instances).
        query::<B>(
            "INSERT INTO provider_request_budgets (connection_id, paid_until_micros) \
             VALUES ($1, $2 + $3) \
             ON CONFLICT (connection_id) DO UPDATE SET paid_until_micros = \
             (CASE WHEN provider_request_budgets.paid_until_micros > $2 \
             THEN provider_request_budgets.paid_until_micros ELSE $2 END) + $3",
        )
        .bind(connection_id)
        .bind(now.timestamp_micros())
        .bind(cost)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
