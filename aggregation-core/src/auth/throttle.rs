//! The per-account throttle of failed logins ([`LoginFailureLimit`]), counted per client
//! network, so that strangers cannot lock an owner out of the networks they log in from.
//!
//! # Networks
//!
//! A login comes from a [`ClientNetwork`]: the /24 of an IPv4 client (IPv4-mapped IPv6
//! addresses included) or the /64 of an IPv6 client, the smallest blocks one subscriber
//! usually holds, so moving within them opens no fresh bucket. Requests without a client
//! address share one network of their own.
//!
//! # Buckets
//!
//! Two kinds of token bucket, each of the configured size (default 10 failures per hour),
//! live in the service's rate-limit store (so they are shared through Redis when that is
//! configured), for an account (a normalized email, known or not):
//!
//! * the **network bucket** of the account and one network: every failed login from that
//!   network takes a token. Empty: that network is refused, the right password included.
//! * the **stranger bucket** of the account: only failed logins from networks that are not
//!   known for the account take a token. Empty: every network that is not known for the
//!   account is refused, the right password included, until a token is back.
//!
//! A network is **known** for an account when the account logged in successfully from it in
//! the last [`KNOWN_NETWORK_DAYS`] days ([`KnownNetworks`]). Its failures do not take from the
//! stranger bucket and an empty stranger bucket does not concern it: thirty wrong passwords
//! from thirty networks leave the owner's own networks alone. Online guessing against one
//! account stays capped at the configured failures per window from all unknown networks
//! together, plus as many from each known network (one the attacker shares with the owner).
//!
//! A successful login takes no token: the right password only looks ([`RateLimitStore::peek`]).
//!
//! # Keys
//!
//! Bucket keys hold neither the email nor the address: they are a prefix and the hex SHA-256
//! of a key derived from the JWT secret followed by the normalized email (and, for network
//! buckets, the network). Whoever reads the store cannot test candidate emails or networks
//! without the secret; every instance sharing the store (and the secret, as they must to
//! accept each other's tokens) computes the same keys. Changing the JWT secret starts every
//! account with full buckets and no known networks.
//!
//! # Timing
//!
//! A failure and a refusal make the same calls: one read of the known networks, then one
//! limiter call for a known network or two at once for an unknown one (records for a failure,
//! peeks for the right password). Unknown emails read the known networks too.
//!
//! # Failing open
//!
//! Limiter store errors fail open, as for every rate limit: a failure that cannot be recorded
//! is not counted, and a bucket that cannot be read does not refuse the right password.

use std::net::IpAddr;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::config::{Config, LoginFailureLimit};
use crate::rate_limit::{BucketPolicy, Decision, RateLimitStore, RateLimitStoreError};
use crate::store::{Store, StoreError};

/// Prefix of the stranger buckets' keys (no rate-limit scope is called `login_failures`, so
/// they cannot meet an endpoint's bucket). The name predates network buckets: these are the
/// per-account buckets of before, now counting only unknown networks.
const STRANGER_KEY_PREFIX: &str = "rl:login_failures:";

/// Prefix of the network buckets' keys.
const NETWORK_KEY_PREFIX: &str = "rl:login_network_failures:";

/// Domain separation of the bucket key derived from the JWT secret.
const KEY_CONTEXT: &[u8] = b"aggregation-core login failure throttle v1\0";

/// Domain separation of the network buckets' digests from the stranger buckets'.
const NETWORK_BUCKET_CONTEXT: &[u8] = b"network\0";

/// Domain separation of the known-network digest key derived from the JWT secret.
const KNOWN_NETWORK_CONTEXT: &[u8] = b"aggregation-core known login networks v1\0";

/// How long after its last successful login a network stays known for an account, in days.
pub(crate) const KNOWN_NETWORK_DAYS: i64 = 30;

/// How many networks each account remembers at most: the most recently used. A traveller
/// or a phone roaming across carrier networks gathers a few dozen in a month; the oldest go
/// first.
pub(crate) const KNOWN_NETWORKS_PER_USER: u32 = 50;

/// How long a network stays known, as a time span.
pub(crate) fn known_network_span() -> TimeDelta {
    TimeDelta::days(KNOWN_NETWORK_DAYS)
}

/// The network a login comes from (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ClientNetwork {
    /// No client address was known.
    Unknown,
    /// The first three octets: the /24.
    V4([u8; 3]),
    /// The first eight octets: the /64.
    V6([u8; 8]),
}

impl ClientNetwork {
    /// The network of a client address.
    pub(crate) fn of(ip: Option<IpAddr>) -> Self {
        match ip.map(|ip| ip.to_canonical()) {
            None => Self::Unknown,
            Some(IpAddr::V4(v4)) => {
                let [a, b, c, _] = v4.octets();
                Self::V4([a, b, c])
            }
            Some(IpAddr::V6(v6)) => {
                let octets = v6.octets();
                let mut prefix = [0; 8];
                prefix.copy_from_slice(&octets[..8]);
                Self::V6(prefix)
            }
        }
    }

    /// Feeds an unambiguous encoding (a family tag, then the prefix) to a digest.
    fn hash_into(&self, digest: &mut Sha256) {
        match self {
            Self::Unknown => digest.update([0]),
            Self::V4(prefix) => {
                digest.update([4]);
                digest.update(prefix);
            }
            Self::V6(prefix) => {
                digest.update([6]);
                digest.update(prefix);
            }
        }
    }
}

/// Which bucket refused a login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The client network's own failures used up its bucket.
    Network,
    /// Failures from networks unknown to the account used up the stranger bucket, and this
    /// network is not known either.
    Strangers,
}

impl Refusal {
    /// For logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Network => "network",
            Self::Strangers => "unknown_networks",
        }
    }
}

/// A key derived from the JWT secret for one use.
fn derived_key(context: &[u8], config: &Config) -> [u8; 32] {
    let mut key = Sha256::new();
    key.update(context);
    key.update(config.jwt_secret());
    key.finalize().into()
}

/// Counts failed logins per account and network and tells when a login is refused.
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
        Self {
            store,
            bucket,
            key: derived_key(KEY_CONTEXT, config),
        }
    }

    /// Whether the throttle counts anything.
    pub(crate) fn is_on(&self) -> bool {
        self.bucket.is_some()
    }

    /// The stranger bucket's key of a normalized email.
    fn stranger_key(&self, normalized_email: &str) -> String {
        let mut digest = Sha256::new();
        digest.update(self.key);
        digest.update(normalized_email.as_bytes());
        format!("{STRANGER_KEY_PREFIX}{}", hex::encode(digest.finalize()))
    }

    /// The network bucket's key of a normalized email and a network.
    fn network_key(&self, normalized_email: &str, network: ClientNetwork) -> String {
        let mut digest = Sha256::new();
        digest.update(self.key);
        digest.update(NETWORK_BUCKET_CONTEXT);
        // Length first: the email is whatever the client sent, the network follows it.
        digest.update((normalized_email.len() as u64).to_be_bytes());
        digest.update(normalized_email.as_bytes());
        network.hash_into(&mut digest);
        format!("{NETWORK_KEY_PREFIX}{}", hex::encode(digest.finalize()))
    }

    /// Counts a failed login for this normalized email from this network; `known`: the
    /// network is known for the account, so the stranger bucket is spared.
    pub(crate) async fn record_failure(
        &self,
        normalized_email: &str,
        network: ClientNetwork,
        known: bool,
    ) {
        let Some(bucket) = &self.bucket else {
            return;
        };
        let network_key = self.network_key(normalized_email, network);
        let (by_network, by_strangers) = if known {
            (self.store.check(&network_key, bucket).await, None)
        } else {
            let stranger_key = self.stranger_key(normalized_email);
            let (by_network, by_strangers) = tokio::join!(
                self.store.check(&network_key, bucket),
                self.store.check(&stranger_key, bucket)
            );
            (by_network, Some(by_strangers))
        };
        for error in [Some(by_network), by_strangers]
            .into_iter()
            .flatten()
            .filter_map(Result::err)
        {
            tracing::debug!(
                error = %error,
                layer = "login_throttle",
                result = "fail_open",
                "recording a failed login failed; not counted"
            );
        }
    }

    /// Whether a login for this normalized email from this network is refused now, and by
    /// which bucket. Changes nothing.
    pub(crate) async fn refusal(
        &self,
        normalized_email: &str,
        network: ClientNetwork,
        known: bool,
    ) -> Option<Refusal> {
        let bucket = self.bucket.as_ref()?;
        let network_key = self.network_key(normalized_email, network);
        let (by_network, by_strangers) = if known {
            (self.store.peek(&network_key, bucket).await, None)
        } else {
            let stranger_key = self.stranger_key(normalized_email);
            let (by_network, by_strangers) = tokio::join!(
                self.store.peek(&network_key, bucket),
                self.store.peek(&stranger_key, bucket)
            );
            (by_network, Some(by_strangers))
        };
        if is_empty(by_network) {
            Some(Refusal::Network)
        } else if by_strangers.is_some_and(is_empty) {
            Some(Refusal::Strangers)
        } else {
            None
        }
    }
}

/// Whether a peek found the bucket empty; a store error reads as not empty (fail-open).
fn is_empty(peeked: Result<Decision, RateLimitStoreError>) -> bool {
    match peeked {
        Ok(decision) => !decision.allowed,
        Err(error) => {
            tracing::debug!(
                error = %error,
                layer = "login_throttle",
                result = "fail_open",
                "reading a failed-login bucket failed; login allowed"
            );
            false
        }
    }
}

/// The networks each account logged in from, in the service's store (durable, and shared by
/// every instance, like the accounts themselves), by a keyed digest of the user id and the
/// network: the database holds no address, and a /24 cannot be found by trying all 2^24
/// without the key. Rows are purged [`KNOWN_NETWORK_DAYS`] after their last success, and
/// each user keeps at most [`KNOWN_NETWORKS_PER_USER`].
#[derive(Clone)]
pub(crate) struct KnownNetworks {
    store: Arc<dyn Store>,
    key: [u8; 32],
}

impl KnownNetworks {
    pub(crate) fn new(config: &Config, store: Arc<dyn Store>) -> Self {
        Self {
            store,
            key: derived_key(KNOWN_NETWORK_CONTEXT, config),
        }
    }

    /// The stored digest of a user's network.
    fn digest(&self, user_id: Uuid, network: ClientNetwork) -> [u8; 32] {
        let mut digest = Sha256::new();
        digest.update(self.key);
        digest.update(user_id.as_bytes());
        network.hash_into(&mut digest);
        digest.finalize().into()
    }

    /// Whether the user logged in successfully from this network within
    /// [`KNOWN_NETWORK_DAYS`] before `at`. [`Uuid::nil`] (no such account) is never known,
    /// after the same query.
    pub(crate) async fn is_known(
        &self,
        user_id: Uuid,
        network: ClientNetwork,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let last = self
            .store
            .login_network_last_success(user_id, &self.digest(user_id, network))
            .await?;
        Ok(last.is_some_and(|last| last > crate::dates::earlier(at, known_network_span())))
    }

    /// Remembers a successful login of the user from this network at `at`.
    pub(crate) async fn remember(
        &self,
        user_id: Uuid,
        network: ClientNetwork,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.store
            .record_login_network(
                user_id,
                &self.digest(user_id, network),
                at,
                KNOWN_NETWORKS_PER_USER,
            )
            .await
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

    fn network(ip: &str) -> ClientNetwork {
        ClientNetwork::of(Some(ip.parse().expect("ip")))
    }

    fn throttle_of(max_failures: u32, clock: &ManualClock) -> LoginThrottle {
        let store = Arc::new(InMemoryRateLimitStore::with_clock(clock.clock()));
        let limit = LoginFailureLimit::new(max_failures, Duration::from_secs(300)).expect("limit");
        LoginThrottle::new(&config(Some(limit)), store)
    }

    const ADA: &str = "ada@example.com";

    #[test]
    fn networks_are_ipv4_slash_24_and_ipv6_slash_64() {
        assert_eq!(network("198.51.100.7"), network("198.51.100.250"));
        assert_ne!(network("198.51.100.7"), network("198.51.101.7"));
        // An IPv4-mapped IPv6 address is its IPv4 client.
        assert_eq!(network("::ffff:198.51.100.9"), network("198.51.100.7"));
        assert_eq!(
            network("2001:db8:1:2::1"),
            network("2001:db8:1:2:ffff:ffff:ffff:ffff")
        );
        assert_ne!(network("2001:db8:1:2::1"), network("2001:db8:1:3::1"));
        assert_eq!(ClientNetwork::of(None), ClientNetwork::Unknown);
        assert_ne!(network("0.0.0.0"), ClientNetwork::Unknown);
        assert_ne!(network("::"), network("0.0.0.0"));
    }

    #[tokio::test]
    async fn failures_from_one_unknown_network_refuse_every_unknown_one() {
        let clock = ManualClock::new(0.0);
        let throttle = throttle_of(3, &clock);
        let (home, there) = (network("198.51.100.7"), network("203.0.113.9"));
        for _ in 0..3 {
            assert_eq!(throttle.refusal(ADA, there, false).await, None);
            throttle.record_failure(ADA, there, false).await;
        }
        assert_eq!(
            throttle.refusal(ADA, there, false).await,
            Some(Refusal::Network)
        );
        assert_eq!(
            throttle.refusal(ADA, network("192.0.2.1"), false).await,
            Some(Refusal::Strangers)
        );
        // Looking does not pay: still refused, and the known network never was.
        assert_eq!(
            throttle.refusal(ADA, there, false).await,
            Some(Refusal::Network)
        );
        assert_eq!(throttle.refusal(ADA, home, true).await, None);
        // Another account is not concerned.
        assert_eq!(
            throttle.refusal("grace@example.com", there, false).await,
            None
        );
        // 3 per 300 s: a token every 100 s.
        clock.advance(99.0);
        assert!(throttle.refusal(ADA, there, false).await.is_some());
        clock.advance(1.0);
        assert_eq!(throttle.refusal(ADA, there, false).await, None);
    }

    #[tokio::test]
    async fn distributed_failures_leave_known_networks_alone() {
        let clock = ManualClock::new(0.0);
        let throttle = throttle_of(10, &clock);
        for third in 0..30_u8 {
            let stranger = network(&format!("203.0.{third}.5"));
            throttle.record_failure(ADA, stranger, false).await;
        }
        let home = network("198.51.100.7");
        assert_eq!(throttle.refusal(ADA, home, true).await, None);
        // The same network, had the owner never logged in from it.
        assert_eq!(
            throttle.refusal(ADA, home, false).await,
            Some(Refusal::Strangers)
        );
        // Each stranger failed only once: its own bucket is not what refuses it.
        assert_eq!(
            throttle.refusal(ADA, network("203.0.7.5"), false).await,
            Some(Refusal::Strangers)
        );
    }

    #[tokio::test]
    async fn a_known_network_is_capped_by_its_own_failures() {
        let clock = ManualClock::new(0.0);
        let throttle = throttle_of(10, &clock);
        let (home, office) = (network("198.51.100.7"), network("2001:db8:1:2::10"));
        for host in 0..10_u8 {
            let neighbour = network(&format!("198.51.100.{}", 100 + host));
            assert_eq!(neighbour, home);
            throttle.record_failure(ADA, neighbour, true).await;
        }
        assert_eq!(
            throttle.refusal(ADA, home, true).await,
            Some(Refusal::Network)
        );
        assert_eq!(throttle.refusal(ADA, office, true).await, None);
        // A known network's failures do not count against the strangers.
        assert_eq!(
            throttle.refusal(ADA, network("203.0.113.9"), false).await,
            None
        );
    }

    #[test]
    fn keys_hold_neither_email_nor_network_and_depend_on_the_secret() {
        let store: Arc<dyn RateLimitStore> = Arc::new(InMemoryRateLimitStore::new());
        let throttle =
            LoginThrottle::new(&config(Some(LoginFailureLimit::default())), store.clone());
        let home = network("198.51.100.7");
        let stranger = throttle.stranger_key(ADA);
        let network_key = throttle.network_key(ADA, home);
        assert!(stranger.starts_with(STRANGER_KEY_PREFIX));
        assert_eq!(stranger.len(), STRANGER_KEY_PREFIX.len() + 64);
        assert!(network_key.starts_with(NETWORK_KEY_PREFIX));
        assert_eq!(network_key.len(), NETWORK_KEY_PREFIX.len() + 64);
        for key in [&stranger, &network_key] {
            assert!(!key.contains("ada"));
            assert!(!key.contains("198"));
        }
        assert_eq!(stranger, throttle.stranger_key(ADA));
        assert_ne!(stranger, throttle.stranger_key("grace@example.com"));
        assert_eq!(
            network_key,
            throttle.network_key(ADA, network("198.51.100.250"))
        );
        assert_ne!(
            network_key,
            throttle.network_key(ADA, network("198.51.101.7"))
        );
        assert_ne!(network_key, throttle.network_key("grace@example.com", home));
        let other_secret = Config::new("https://api.example.com", vec![8; 32]).expect("config");
        let other = LoginThrottle::new(&other_secret, store);
        assert_ne!(stranger, other.stranger_key(ADA));
        assert_ne!(network_key, other.network_key(ADA, home));
    }

    /// A store that fails every call, and has no peek of its own.
    struct Down;

    #[async_trait::async_trait]
    impl RateLimitStore for Down {
        async fn check(&self, _: &str, _: &BucketPolicy) -> Result<Decision, RateLimitStoreError> {
            Err(RateLimitStoreError::Backend("connection refused".into()))
        }
    }

    #[tokio::test]
    async fn store_errors_fail_open() {
        let throttle =
            LoginThrottle::new(&config(Some(LoginFailureLimit::default())), Arc::new(Down));
        let there = network("203.0.113.9");
        for known in [false, true] {
            for _ in 0..20 {
                throttle.record_failure(ADA, there, known).await;
            }
            // The default peek is unsupported: treated as any store error.
            assert_eq!(throttle.refusal(ADA, there, known).await, None);
        }
    }

    #[tokio::test]
    async fn off_counts_nothing() {
        let store = Arc::new(InMemoryRateLimitStore::new());
        let throttle = LoginThrottle::new(&config(None), store.clone());
        assert!(!throttle.is_on());
        let there = network("203.0.113.9");
        for _ in 0..20 {
            throttle.record_failure(ADA, there, false).await;
        }
        assert_eq!(throttle.refusal(ADA, there, false).await, None);
        assert!(store.is_empty());
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn networks_are_known_for_30_days_after_a_login() {
        use crate::store::{NewUser, SqliteStore, UserStore as _, now};

        let store = Arc::new(SqliteStore::in_memory().await.expect("store"));
        store.migrate().await.expect("migrate");
        let user_id = Uuid::now_v7();
        store
            .create_user(&NewUser {
                id: user_id,
                email: ADA.to_owned(),
                email_normalized: ADA.to_owned(),
                password_hash: "x".to_owned(),
                created_at: now(),
            })
            .await
            .expect("user");
        let known = KnownNetworks::new(&config(None), store.clone());
        let (home, there) = (network("198.51.100.7"), network("203.0.113.9"));
        let at = now();
        assert!(!known.is_known(user_id, home, at).await.expect("read"));
        known.remember(user_id, home, at).await.expect("write");
        assert!(known.is_known(user_id, home, at).await.expect("read"));
        assert!(
            known
                .is_known(user_id, network("198.51.100.200"), at)
                .await
                .expect("read")
        );
        assert!(!known.is_known(user_id, there, at).await.expect("read"));
        assert!(!known.is_known(Uuid::nil(), home, at).await.expect("read"));
        let almost = at + known_network_span() - TimeDelta::seconds(1);
        assert!(known.is_known(user_id, home, almost).await.expect("read"));
        let after = at + known_network_span();
        assert!(!known.is_known(user_id, home, after).await.expect("read"));
        // The digest is keyed by the secret and bound to the user.
        let other = KnownNetworks::new(
            &Config::new("https://api.example.com", vec![8; 32]).expect("config"),
            store,
        );
        assert!(!other.is_known(user_id, home, at).await.expect("read"));
        assert_ne!(
            known.digest(user_id, home),
            known.digest(Uuid::now_v7(), home)
        );
    }
}
