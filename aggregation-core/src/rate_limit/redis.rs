//! Bucket storage in Redis, shared by every instance of the service (`AGG_REDIS_URL`).

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

use super::bucket::{self, BucketPolicy, Decision};
use super::{Clock, RateLimitStore, RateLimitStoreError};

/// The check, atomically. KEYS[1] = bucket key; ARGV = max_tokens, refill_rate (per minute),
/// cost, ttl (seconds), now (seconds; empty = use the server's TIME).
/// Returns the tokens available before paying, as a string.
/// Kept in its own file so `benches/redis-baseline.sh` runs the very same script.
const CHECK_SCRIPT: &str = include_str!("check.lua");

/// The peek: reads only. KEYS[1] = bucket key; ARGV = max_tokens, refill_rate (per minute),
/// now (seconds; empty = use the server's TIME). Returns the tokens available, as a string.
const PEEK_SCRIPT: &str = include_str!("peek.lua");

/// Token buckets in Redis, shared by every instance pointing at the same server and prefix.
///
/// Each check is one Lua script run atomically by Redis: `HMGET` the bucket's `tokens` and
/// `ts`, refill with the spec's formula, take the cost if there is enough, `HSET` the new
/// state and `EXPIRE` it after the policy's TTL. The script returns the tokens that were
/// available before the request paid; the decision's other numbers are derived from that in
/// Rust by the same code the in-memory store uses. Numbers cross the wire
/// as strings written with 17 significant digits, so no precision is lost on the way.
///
/// A peek ([`RateLimitStore::peek`]) is a second, read-only script with the same refill
/// formula: it writes nothing and leaves the key's TTL alone. Bucket keys expire through the
/// check script's `EXPIRE` after the policy's TTL, so Redis needs no cap of its own.
///
/// The scripts are sent once and then called by their SHA-1 (`EVALSHA`); when Redis answers
/// `NOSCRIPT` (after a restart or `SCRIPT FLUSH`) [`redis::Script`] loads it again and retries.
///
/// # Time
/// By default the script reads the **Redis server's clock** (`TIME`), so instances whose
/// clocks disagree still share consistent buckets. Scripts that call `TIME` and then write
/// need effect replication: the default from Redis 5 on, and the script calls
/// `redis.replicate_commands()` first for Redis 3.2–4 (a no-op on 7). With
/// [`RedisRateLimitStore::with_client_clock`] the caller's clock is passed as an argument
/// instead (tests use this to compare with the in-memory store under a fake clock). Either
/// way a bucket's time never goes backwards.
///
/// # Failure
/// Creating the store never touches the network: the connection
/// ([`redis::aio::ConnectionManager`]) is opened on the first check and re-opened by itself
/// after a failure. Every check (connection included) is bounded by the store's timeout
/// (default [`RedisRateLimitStore::DEFAULT_TIMEOUT`], 100 ms); when Redis is down, slow or
/// answers nonsense the check returns an error, which the service's limiter turns into
/// fail-open. A check cut off by the timeout may still have run on the server
/// (one token taken while the request was let through). Checks must run inside a Tokio
/// runtime with time enabled.
///
/// ```no_run
/// use std::time::Duration;
/// use aggregation_core::rate_limit::{BucketPolicy, RateLimitStore, RedisRateLimitStore};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisRateLimitStore::from_url(
///     "redis://127.0.0.1:6379",
///     "agg:".to_owned(),
///     RedisRateLimitStore::DEFAULT_TIMEOUT,
/// )?;
/// let login = BucketPolicy::new(5.0, 5.0, 1)?;
/// let decision = store.check("rl:ip:203.0.113.9:POST:/api/v1/sessions", &login).await?;
/// # Ok(()) }
/// ```
pub struct RedisRateLimitStore {
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    script: redis::Script,
    peek_script: redis::Script,
    key_prefix: String,
    timeout: Duration,
    clock: Option<Clock>,
}

impl std::fmt::Debug for RedisRateLimitStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRateLimitStore")
            .field("key_prefix", &self.key_prefix)
            .field("timeout", &self.timeout)
            .field(
                "clock",
                &if self.clock.is_some() {
                    "client"
                } else {
                    "server"
                },
            )
            .finish_non_exhaustive()
    }
}

impl RedisRateLimitStore {
    /// Default bound on one check: 100 ms.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

    /// A store on `client`, prefixing every key with `key_prefix` (e.g. `"agg:"`), each check
    /// bounded by `timeout`. Does not connect (see "Failure" in the [type docs](Self)).
    pub fn new(client: redis::Client, key_prefix: String, timeout: Duration) -> Self {
        Self {
            client,
            connection: OnceCell::new(),
            script: redis::Script::new(CHECK_SCRIPT),
            peek_script: redis::Script::new(PEEK_SCRIPT),
            key_prefix,
            timeout,
            clock: None,
        }
    }

    /// A store for a `redis://` or `rediss://` URL. Does not connect.
    ///
    /// # Errors
    /// [`RateLimitStoreError::Config`] when the URL cannot be used (the redis crate's messages
    /// do not repeat the URL, which may hold a password).
    pub fn from_url(
        url: &str,
        key_prefix: String,
        timeout: Duration,
    ) -> Result<Self, RateLimitStoreError> {
        let client = redis::Client::open(url)
            .map_err(|e| RateLimitStoreError::Config(format!("invalid Redis URL: {e}")))?;
        Ok(Self::new(client, key_prefix, timeout))
    }

    /// Use `clock` (seconds since the Unix epoch, e.g. [`wall_clock`](super::wall_clock))
    /// instead of the Redis server's `TIME`. Only sensible when every instance's clock is
    /// synchronised, or in tests.
    pub fn with_client_clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The prefix put before every bucket key.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// The bound on one check.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn connection(&self) -> Result<ConnectionManager, RateLimitStoreError> {
        self.connection
            .get_or_try_init(|| async {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.timeout.max(Duration::from_millis(500))))
                    .set_response_timeout(Some(self.timeout))
                    // Fail a dead connection attempt quickly; the next check starts another.
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(500));
                self.client
                    .get_connection_manager_lazy(config)
                    .map_err(backend)
            })
            .await
            .cloned()
    }

    async fn run(&self, key: &str, policy: &BucketPolicy) -> Result<Decision, RateLimitStoreError> {
        let mut connection = self.connection().await?;
        let now = match &self.clock {
            Some(clock) => clock().to_string(),
            None => String::new(),
        };
        let mut invocation = self.script.prepare_invoke();
        invocation
            .key(format!("{}{key}", self.key_prefix))
            .arg(policy.max_tokens().to_string())
            .arg(policy.refill_rate().to_string())
            .arg(policy.cost())
            .arg(policy.ttl_secs())
            .arg(now);
        let reply: String = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(backend)?;
        Ok(bucket::decide(parse_tokens(&reply)?, policy).1)
    }

    async fn run_peek(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        let mut connection = self.connection().await?;
        let now = match &self.clock {
            Some(clock) => clock().to_string(),
            None => String::new(),
        };
        let mut invocation = self.peek_script.prepare_invoke();
        invocation
            .key(format!("{}{key}", self.key_prefix))
            .arg(policy.max_tokens().to_string())
            .arg(policy.refill_rate().to_string())
            .arg(now);
        let reply: String = invocation
            .invoke_async(&mut connection)
            .await
            .map_err(backend)?;
        Ok(bucket::peek(parse_tokens(&reply)?, policy))
    }
}

/// The tokens a script returned.
fn parse_tokens(reply: &str) -> Result<f64, RateLimitStoreError> {
    reply
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| RateLimitStoreError::InvalidReply(format!("tokens `{reply}`")))
}

fn backend(e: redis::RedisError) -> RateLimitStoreError {
    RateLimitStoreError::Backend(Box::new(e))
}

#[async_trait]
impl RateLimitStore for RedisRateLimitStore {
    async fn check(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        tokio::time::timeout(self.timeout, self.run(key, policy))
            .await
            .map_err(|_| RateLimitStoreError::Timeout(self.timeout))?
    }

    async fn peek(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        tokio::time::timeout(self.timeout, self.run_peek(key, policy))
            .await
            .map_err(|_| RateLimitStoreError::Timeout(self.timeout))?
    }

    /// `PING`, bounded by the store's timeout.
    async fn ping(&self) -> Result<(), RateLimitStoreError> {
        let ping = async {
            let mut connection = self.connection().await?;
            let reply: String = redis::cmd("PING")
                .query_async(&mut connection)
                .await
                .map_err(backend)?;
            if reply == "PONG" {
                Ok(())
            } else {
                Err(RateLimitStoreError::InvalidReply(format!(
                    "PING answered `{reply}`"
                )))
            }
        };
        tokio::time::timeout(self.timeout, ping)
            .await
            .map_err(|_| RateLimitStoreError::Timeout(self.timeout))?
    }
}
