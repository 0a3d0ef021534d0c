//! The networks each user logged in from (see [`LoginNetworkStore`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::backend::{Backend, SqlStore, query, query_scalar};
use crate::store::{LoginNetworkStore, StoreError};

#[async_trait]
impl<B: Backend> LoginNetworkStore for SqlStore<B> {
    async fn login_network_last_success(
        &self,
        user_id: Uuid,
        network_digest: &[u8],
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        Ok(query_scalar::<B, _>(
            "SELECT last_success_at FROM login_networks \
             WHERE user_id = $1 AND network_digest = $2",
        )
        .bind(user_id)
        .bind(network_digest)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn record_login_network(
        &self,
        user_id: Uuid,
        network_digest: &[u8],
        at: DateTime<Utc>,
        keep: u32,
    ) -> Result<(), StoreError> {
        query::<B>(
            "INSERT INTO login_networks (user_id, network_digest, last_success_at) \
             VALUES ($1, $2, $3) ON CONFLICT (user_id, network_digest) \
             DO UPDATE SET last_success_at = excluded.last_success_at \
             WHERE login_networks.last_success_at < excluded.last_success_at",
        )
        .bind(user_id)
        .bind(network_digest)
        .bind(at)
        .execute(&self.pool)
        .await?;
        // Its own statement, not a transaction with the upsert: a concurrent login of the same
        // user then never waits on this one's row locks, and a trim that loses a race is made
        // up by the next login.
        query::<B>(
            "DELETE FROM login_networks WHERE user_id = $1 AND network_digest NOT IN ( \
                 SELECT network_digest FROM login_networks WHERE user_id = $1 \
                 ORDER BY last_success_at DESC, network_digest LIMIT $2)",
        )
        .bind(user_id)
        .bind(i64::from(keep))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn purge_login_networks_before(&self, cutoff: DateTime<Utc>) -> Result<u64, StoreError> {
        Ok(
            query::<B>("DELETE FROM login_networks WHERE last_success_at <= $1")
                .bind(cutoff)
                .execute(&self.pool)
                .await?
                .rows_affected(),
        )
    }
}
