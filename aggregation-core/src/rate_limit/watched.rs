//! The rate-limit store as the login throttle and the readiness check use it: its outages
//! are logged once when they start, as a count every 10 s while they last and once when they
//! end ([`OutageLog`]), instead of a line per request (a Redis outage wrote two ERROR lines
//! per request: the endpoint's check and the login throttle's). Every caller still fails
//! open on every failed call.
//!
//! The endpoints' limiter ([`RateLimiter`](super::RateLimiter)) calls the store itself and
//! feeds the same [`OutageLog`] ([`rate_limit_outage`]), so that the outage's first line is the
//! spec's fail-open record, with the endpoint and the client, and one outage is logged once
//! whoever meets it first.

use std::sync::Arc;

use async_trait::async_trait;

use super::bucket::{BucketPolicy, Decision};
use super::{RateLimitStore, RateLimitStoreError};
use crate::outage::OutageLog;

/// The outage log of the rate-limit store; share one between its watched store and the
/// limiter.
pub(crate) fn rate_limit_outage() -> Arc<OutageLog> {
    Arc::new(OutageLog::new(
        "rate-limit store",
        "requests are let through without rate limits (fail-open)",
    ))
}

/// A [`RateLimitStore`] whose failures feed an [`OutageLog`].
pub(crate) struct WatchedRateLimitStore {
    inner: Arc<dyn RateLimitStore>,
    outage: Arc<OutageLog>,
}

impl WatchedRateLimitStore {
    /// Watches `inner`, logging to `outage` ([`rate_limit_outage`]).
    pub(crate) fn new(inner: Arc<dyn RateLimitStore>, outage: Arc<OutageLog>) -> Self {
        Self { inner, outage }
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
