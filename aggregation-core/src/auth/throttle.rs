//! The per-account throttle of failed logins ([`LoginFailureLimit`]).
//!
//! One token bucket per normalized email, known or not, in the service's rate-limit store
//! (so shared through Redis when that is configured). A failed login takes a token; a login
//! with the right password only looks ([`RateLimitStore::peek`]) and is refused, with the
//! answer of a wrong password, while the bucket is empty.
//!
//! The bucket key holds no email: it is `rl:login_failures:` and the hex SHA-256 of a key
//! derived from the JWT secret followed by the normalized email. Whoever reads the store
//! cannot test candidate emails without the secret; every instance sharing the store (and the
//! secret, as they must to accept each other's tokens) computes the same key. Changing the JWT
//! secret starts every account with a full bucket.
//!
//! Store errors fail open, as for every rate limit: a failure that cannot be recorded is not
//! counted, and a bucket that cannot be read does not refuse the right password.

use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::config::{Config, LoginFailureLimit};
use crate::rate_limit::{BucketPolicy, RateLimitStore};

/// Prefix of the throttle's bucket keys (no rate-limit scope is called `login_failures`, so
/// they cannot meet an endpoint's bucket).
const KEY_PREFIX: &str = "rl:login_failures:";

/// Domain separation of the key derived from the JWT secret.
const KEY_CONTEXT: &[u8] = b"aggregation-core login failure throttle v1\0";

/// Counts failed logins per account and tells when an account is throttled.
#[derive(Clone)]
pub(crate) struct LoginThrottle {
    store: Arc<dyn RateLimitStore>,
    /// `None`: off.
    bucket: Option<BucketPolicy>,
    key: [u8; 32],
}

impl LoginThrottle {
    pub(crate) fn new(config: &Config, store: Arc<dyn RateLimitStore>) -> Self {
        let bucket = config.login_failure_limit().and_then(|limit| {
            let bucket = LoginFailureLimit::bucket(&limit);
            if bucket.is_none() {
                tracing::error!("unusable login failure limit; the throttle is off");
            }
            bucket
        });
        let mut key = Sha256::new();
        key.update(KEY_CONTEXT);
        key.update(config.jwt_secret());
        Self {
            store,
            bucket,
            key: key.finalize().into(),
        }
    }

    /// The bucket key of a normalized email.
    fn bucket_key(&self, normalized_email: &str) -> String {
        let mut digest = Sha256::new();
        digest.update(self.key);
        digest.update(normalized_email.as_bytes());
        format!("{KEY_PREFIX}{}", hex::encode(digest.finalize()))
    }

    /// Counts a failed login for this normalized email.
    pub(crate) async fn record_failure(&self, normalized_email: &str) {
        let Some(bucket) = &self.bucket else {
            return;
        };
        let key = self.bucket_key(normalized_email);
        if let Err(error) = self.store.check(&key, bucket).await {
            tracing::debug!(
                error = %error,
                layer = "login_throttle",
                result = "fail_open",
                "recording a failed login failed; not counted"
            );
        }
    }

    /// Whether logins for this normalized email are refused now: its failures used up the
    /// bucket. Changes nothing.
    pub(crate) async fn is_throttled(&self, normalized_email: &str) -> bool {
        let Some(bucket) = &self.bucket else {
            return false;
        };
        let key = self.bucket_key(normalized_email);
        match self.store.peek(&key, bucket).await {
            Ok(decision) => !decision.allowed,
            Err(error) => {
                tracing::debug!(
                    error = %error,
                    layer = "login_throttle",
                    result = "fail_open",
                    "reading the failed-login bucket failed; login allowed"
                );
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::rate_limit::{InMemoryRateLimitStore, ManualClock};

    fn config(limit: Option<LoginFailureLimit>) -> Config {
        Config::new("https://api.example.com", vec![7; 32])
            .expect("config")
            .with_login_failure_limit(limit)
    }

    #[tokio::test]
    async fn failures_throttle_until_a_token_is_back() {
        let clock = ManualClock::new(0.0);
        let store = Arc::new(InMemoryRateLimitStore::with_clock(clock.clock()));
        let limit = LoginFailureLimit::new(3, Duration::from_secs(300)).expect("limit");
        let throttle = LoginThrottle::new(&config(Some(limit)), store.clone());
        for _ in 0..3 {
            assert!(!throttle.is_throttled("ada@example.com").await);
            throttle.record_failure("ada@example.com").await;
        }
        assert!(throttle.is_throttled("ada@example.com").await);
        // Looking does not pay: still exactly one bucket, still throttled.
        assert!(throttle.is_throttled("ada@example.com").await);
        assert_eq!(store.len(), 1);
        // Another account is not.
        assert!(!throttle.is_throttled("grace@example.com").await);
        // 3 per 300 s: a token every 100 s.
        clock.advance(99.0);
        assert!(throttle.is_throttled("ada@example.com").await);
        clock.advance(1.0);
        assert!(!throttle.is_throttled("ada@example.com").await);
    }

    #[tokio::test]
    async fn keys_hold_no_email_and_depend_on_the_secret() {
        let store: Arc<dyn RateLimitStore> = Arc::new(InMemoryRateLimitStore::new());
        let throttle =
            LoginThrottle::new(&config(Some(LoginFailureLimit::default())), store.clone());
        let key = throttle.bucket_key("ada@example.com");
        assert!(key.starts_with(KEY_PREFIX));
        assert_eq!(key.len(), KEY_PREFIX.len() + 64);
        assert!(!key.contains("ada"));
        assert_eq!(key, throttle.bucket_key("ada@example.com"));
        assert_ne!(key, throttle.bucket_key("grace@example.com"));
        let other_secret = Config::new("https://api.example.com", vec![8; 32]).expect("config");
        assert_ne!(
            key,
            LoginThrottle::new(&other_secret, store).bucket_key("ada@example.com")
        );
    }

    /// A store that fails every call, and has no peek of its own.
    struct Down;

    #[async_trait::async_trait]
    impl RateLimitStore for Down {
        async fn check(
            &self,
            _: &str,
            _: &BucketPolicy,
        ) -> Result<crate::rate_limit::Decision, crate::rate_limit::RateLimitStoreError> {
            Err(crate::rate_limit::RateLimitStoreError::Backend(
                "connection refused".into(),
            ))
        }
    }

    #[tokio::test]
    async fn store_errors_fail_open() {
        let throttle =
            LoginThrottle::new(&config(Some(LoginFailureLimit::default())), Arc::new(Down));
        for _ in 0..20 {
            throttle.record_failure("ada@example.com").await;
        }
        // The default peek is unsupported: treated as any store error.
        assert!(!throttle.is_throttled("ada@example.com").await);
    }

    #[tokio::test]
    async fn off_counts_nothing() {
        let store = Arc::new(InMemoryRateLimitStore::new());
        let throttle = LoginThrottle::new(&config(None), store.clone());
        for _ in 0..20 {
            throttle.record_failure("ada@example.com").await;
        }
        assert!(!throttle.is_throttled("ada@example.com").await);
        assert!(store.is_empty());
    }
}
