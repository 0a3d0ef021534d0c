//! The networks each user logged in from: the "known networks" of the failed-login throttle
//! (see [`crate::auth`]), which are not refused because of other networks' failures.
//!
//! The store sees only opaque digests of networks: the service computes them with a key the
//! database does not hold, so the table tells no one where a user logs in from.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreError;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// Where successful logins are remembered, per user and network digest.
#[async_trait]
pub trait LoginNetworkStore: Send + Sync {
    /// When the user last logged in from the network with this digest; `None` when never (or
    /// since purged).
    async fn login_network_last_success(
        &self,
        user_id: Uuid,
        network_digest: &[u8],
    ) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// Records a successful login of the user from the network with this digest at `at` (a
    /// later time already stored stays), then deletes the user's networks beyond the `keep`
    /// most recently used. The user must exist.
    async fn record_login_network(
        &self,
        user_id: Uuid,
        network_digest: &[u8],
        at: DateTime<Utc>,
        keep: u32,
    ) -> Result<(), StoreError>;

    /// Deletes the networks whose last successful login is at or before `cutoff`; how many.
    async fn purge_login_networks_before(&self, cutoff: DateTime<Utc>) -> Result<u64, StoreError>;
}
