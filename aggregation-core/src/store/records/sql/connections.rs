//! Provider connections as records: creation, the user's connection of a slug and alias, and
//! the look-ups the other aggregates share.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::backend::{Backend, QueryBuilder, SqlStore, Tx, query, query_as};
use crate::store::{
    ConnectionRecord, ConnectionStatus, ConnectionStore, NewConnection, StoreError, provider_id,
};

/// The columns of [`ConnectionRecord`], for `SELECT` and `RETURNING`.
pub(in crate::store) const CONNECTION_COLUMNS: &str = "id, user_id, provider_id, provider_slug, alias, \
     status, encrypted_credentials, credentials_key_id, credentials_expires_at, connected_at, \
     last_sync_at, created_at, updated_at";
pub(in crate::store) async fn insert_connection<B: Backend>(
    tx: &mut Tx<B>,
    connection: &NewConnection,
) -> Result<ConnectionRecord, StoreError> {
    let sql = format!(
        "INSERT INTO connections (id, user_id, provider_id, provider_slug, alias, status, \
         encrypted_credentials, credentials_key_id, credentials_expires_at, connected_at, \
         last_sync_at, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, $10, $10) \
         RETURNING {CONNECTION_COLUMNS}"
    );
    Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
        .bind(connection.id)
        .bind(connection.user_id)
        .bind(provider_id(&connection.provider_slug))
        .bind(&connection.provider_slug)
        .bind(connection.alias.as_deref())
        .bind(connection.status.as_str())
        .bind(connection.encrypted_credentials.as_deref())
        .bind(connection.credentials_key_id.as_deref())
        .bind(connection.credentials_expires_at)
        .bind(connection.created_at)
        .fetch_one(&mut **tx)
        .await?)
}

#[async_trait]
impl<B: Backend> ConnectionStore for SqlStore<B> {
    async fn create_connection(
        &self,
        connection: &NewConnection,
    ) -> Result<ConnectionRecord, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let record = insert_connection(&mut tx, connection).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn find_or_create_connection(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<ConnectionRecord, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let (record, _) =
            find_or_create_connection_in(&mut tx, user_id, provider_slug, alias, now).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn connection_for_user(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
    ) -> Result<Option<ConnectionRecord>, StoreError> {
        let sql =
            format!("SELECT {CONNECTION_COLUMNS} FROM connections WHERE id = $1 AND user_id = $2");
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(connection_id)
            .bind(user_id)
            .fetch_optional(&self.pool)
            .await?)
    }
}

/// Locks the user's row for the rest of the transaction (PostgreSQL) so concurrent transactions
/// looking up or creating the user's connections see one another's; SQLite's `BEGIN IMMEDIATE`
/// already serializes writers. [`StoreError::Other`] when the user does not exist.
pub(in crate::store) async fn lock_user_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
) -> Result<(), StoreError> {
    let locked = query::<B>("UPDATE users SET updated_at = updated_at WHERE id = $1")
        .bind(user_id)
        .execute(&mut **tx)
        .await?;
    if locked.rows_affected() == 0 {
        return Err(StoreError::Other(format!("unknown user {user_id}")));
    }
    Ok(())
}

/// The user's oldest connection with this slug and alias (compared exactly, `None` matching
/// `None`) that is not disconnected.
pub(in crate::store) async fn live_connection_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    provider_slug: &str,
    alias: Option<&str>,
) -> Result<Option<ConnectionRecord>, StoreError> {
    let mut query = QueryBuilder::<B>::new(format!("SELECT {CONNECTION_COLUMNS} FROM connections"));
    query
        .push(" WHERE user_id = ")
        .push_bind(user_id)
        .push(" AND provider_slug = ")
        .push_bind(provider_slug);
    match alias {
        Some(alias) => query.push(" AND alias = ").push_bind(alias),
        None => query.push(" AND alias IS NULL"),
    };
    query.push(" AND status <> 'disconnected' ORDER BY created_at, id LIMIT 1");
    Ok(query.build_query_as().fetch_optional(&mut **tx).await?)
}

/// The user's connection with this slug and alias that is not disconnected, created (active,
/// no credentials) when there is none; and whether it was created.
pub(in crate::store) async fn find_or_create_connection_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    provider_slug: &str,
    alias: Option<&str>,
    now: DateTime<Utc>,
) -> Result<(ConnectionRecord, bool), StoreError> {
    lock_user_in(tx, user_id).await?;
    if let Some(existing) = live_connection_in(tx, user_id, provider_slug, alias).await? {
        return Ok((existing, false));
    }
    let connection = NewConnection {
        id: Uuid::now_v7(),
        user_id,
        provider_slug: provider_slug.to_owned(),
        alias: alias.map(str::to_owned),
        status: ConnectionStatus::Active,
        encrypted_credentials: None,
        credentials_key_id: None,
        credentials_expires_at: None,
        created_at: now,
    };
    Ok((insert_connection(tx, &connection).await?, true))
}

/// Moves the connection's last sync (and last change) to `now`.
pub(in crate::store) async fn mark_synced<B: Backend>(
    tx: &mut Tx<B>,
    connection_id: Uuid,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    query::<B>("UPDATE connections SET last_sync_at = $2, updated_at = $2 WHERE id = $1")
        .bind(connection_id)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
