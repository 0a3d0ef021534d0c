//! The rate-limit store as the service uses it: its outages are logged once when they start,
//! as a count every 10 s while they last and once when they end ([`OutageLog`]), instead of a
//! line per request (a Redis outage wrote two ERROR lines per request: the endpoint's check
//! and the login throttle's). The limiter still fails open on every failed call.

use std::sync::Arc;

use async_trait::async_trait;

use super::bucket::{BucketPolicy, Decision};
use super::{RateLimitStore, RateLimitStoreError};
use crate::outage::OutageLog;

/// A [`RateLimitStore`] whose failures feed one [`OutageLog`].
pub(crate) struct WatchedRateLimitStore {
    inner: Arc<dyn RateLimitStore>,
    outage: OutageLog,
}

impl WatchedRateLimitStore {
    /// Watches `inner`.
    pub(crate) fn new(inner: Arc<dyn RateLimitStore>) -> Self {
        Self {
            inner,
            outage: OutageLog::new(
                "rate-limit store",
                "requests are let through without rate limits (fail-open)",
            ),
        }
    }

    fn learn<T>(&self, outcome: Result<T, RateLimitStoreError>) -> Result<T, RateLimitStoreError> {
        match &outcome {
            Ok(_) => self.outage.success(),
            // A store without the operation is not down.
            Err(RateLimitStoreError::Unsupported(_)) => {}
            Err(error) => self.outage.failure(error),
        }
        outcome
    }
}

#[async_trait]
impl RateLimitStore for WatchedRateLimitStore {
    async fn check(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        self.learn(self.inner.check(key, policy).await)
    }

    async fn peek(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        self.learn(self.inner.peek(key, policy).await)
    }

    async fn ping(&self) -> Result<(), RateLimitStoreError> {
        self.learn(self.inner.ping().await)
    }
}
