//! Rate limiting: token buckets per endpoint, scoped by client IP, user, user and provider,
//! user and account, or globally.
//!
//! * [`Policy`], [`Scope`], the built-in [`PolicyTable`] and its TOML overrides
//!   (`AGG_RATE_LIMITS`).
//! * [`RateLimitStore`]: where bucket states live: [`InMemoryRateLimitStore`] (default) or
//!   `RedisRateLimitStore` (feature `redis`, `AGG_REDIS_URL`).
//! * [`parse_cidr_list`]: the trusted proxies (`AGG_TRUSTED_PROXIES`); only behind them is the
//!   client address read from `X-Forwarded-For`.
//! * [`RateLimitEvent`]: the spec's `RateLimitCheck*` events, delivered to the service's
//!   [`EventSink`](crate::EventSink) as [`DomainEvent::RateLimit`](crate::DomainEvent::RateLimit).
//!
//! The service's limiter ties them together: policy lookup, bucket key, store, events, and
//! fail-open (a store that fails allows the request).
//!
//! The limiter decides; the HTTP layer renders. For a limited endpoint it gets a
//! [`Decision`] and sets `X-RateLimit-Limit` = [`Decision::limit`],
//! `X-RateLimit-Remaining` = [`Decision::remaining`], `X-RateLimit-Reset` =
//! [`Decision::reset_after_secs`]; when denied, 429 with `Retry-After` and the body's
//! `retry_after` = [`Decision::retry_after_header`].

use std::net::IpAddr;
#[cfg(feature = "testing")]
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use ipnet::Ipv6Net;

use crate::outage::OutageLog;

mod bucket;
pub(crate) mod client_ip;
mod events;
mod memory;
pub(crate) mod policy;
#[cfg(feature = "redis")]
mod redis;
mod watched;

pub use bucket::{BucketPolicy, Decision};
pub use client_ip::{CidrError, parse_cidr, parse_cidr_list};
#[cfg(test)]
pub(crate) use events::NoopEvents;
pub use events::RateLimitEvent;
#[cfg(test)]
pub(crate) use events::RecordingEvents;
pub(crate) use events::{RateLimitEvents, TracingEvents};
#[doc(no_inline)]
pub use ipnet::IpNet;
pub use memory::InMemoryRateLimitStore;
pub use policy::{Policy, PolicyError, PolicyTable, Scope};
#[cfg(feature = "redis")]
pub use redis::RedisRateLimitStore;
pub(crate) use watched::{WatchedRateLimitStore, rate_limit_outage};

/// A clock: seconds (fractional) from a fixed origin. Stores read it once per check.
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

/// Seconds since the first call in this process, from [`Instant`]: never jumps. The
/// in-memory store's default.
pub(crate) fn monotonic_clock() -> Clock {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    Arc::new(move || start.elapsed().as_secs_f64())
}

/// Seconds since the Unix epoch, from [`SystemTime`] (0 if the system clock is before 1970).
pub fn wall_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs_f64()
    })
}

/// A clock that moves only when told to, for tests and benchmarks. Clones share the time.
#[cfg(feature = "testing")]
#[derive(Debug, Clone)]
pub struct ManualClock {
    bits: Arc<AtomicU64>,
}

#[cfg(feature = "testing")]
impl ManualClock {
    /// A clock showing `secs`.
    pub fn new(secs: f64) -> Self {
        Self {
            bits: Arc::new(AtomicU64::new(secs.to_bits())),
        }
    }

    /// The time shown.
    pub fn now(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::SeqCst))
    }

    /// Show `secs`.
    pub fn set(&self, secs: f64) {
        self.bits.store(secs.to_bits(), Ordering::SeqCst);
    }

    /// Move forward by `secs`.
    pub fn advance(&self, secs: f64) {
        // Read-modify-write without a lost update.
        let _ = self
            .bits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| {
                Some((f64::from_bits(b) + secs).to_bits())
            });
    }

    /// This clock as a [`Clock`] for a store.
    pub fn clock(&self) -> Clock {
        let this = self.clone();
        Arc::new(move || this.now())
    }
}

/// A store failed; the limiter allows the request (fail-open).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimitStoreError {
    /// The store did not answer within its timeout.
    #[error("rate-limit store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store could not be reached or reported an error.
    #[error("rate-limit store error: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store answered something that is not a bucket state.
    #[error("rate-limit store returned an invalid reply: {0}")]
    InvalidReply(String),
    /// The store's configuration cannot be used (e.g. a malformed URL).
    #[error("invalid rate-limit store configuration: {0}")]
    Config(String),
    /// The store does not implement this operation (the default of
    /// [`RateLimitStore::peek`]).
    #[error("rate-limit store does not support {0}")]
    Unsupported(&'static str),
}

/// Where bucket states live.
///
/// `check` is the whole operation for one request and must be **atomic per key**: read the
/// state (a missing or expired state is a full bucket), refill it for the store's current
/// time and take `policy.cost()` tokens when there are that many (the spec's token bucket, as
/// the built-in stores compute it), write the new state with a time to live of
/// [`BucketPolicy::ttl_secs`], and return the decision. Concurrent checks of one key must
/// behave as if run one after the other. An error means nothing is known (the limiter then
/// allows the request); a store must bound how long it can take.
#[async_trait]
pub trait RateLimitStore: Send + Sync + 'static {
    /// Check and consume `policy.cost()` tokens from the bucket `key`.
    async fn check(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError>;

    /// The decision a check of the bucket `key` would get now, **consuming nothing** and
    /// leaving the stored state as it is (the decision for the tokens available now; a
    /// missing or expired state is a full bucket). The per-account login throttle uses it to
    /// ask whether an account may log in without charging successful logins.
    ///
    /// The default answers [`RateLimitStoreError::Unsupported`], which callers treat like any
    /// store error, i.e. fail-open: with such a store a correct password is never refused by
    /// the login throttle (wrong ones are refused anyway). Both built-in stores implement it.
    async fn peek(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        let _ = (key, policy);
        Err(RateLimitStoreError::Unsupported("peek"))
    }

    /// Whether the store answers, for the service's readiness check (`GET /health/ready`);
    /// bounded like a check. The default answers `Ok` at once: right for a store living in the
    /// process, which is always there. A store behind the network (Redis) asks it.
    async fn ping(&self) -> Result<(), RateLimitStoreError> {
        Ok(())
    }
}

/// Who is making a request, as far as rate limiting needs to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RequestIdentity {
    /// The client address (see [`client_ip::client_ip`]); `None` when unknown.
    pub(crate) client_ip: Option<IpAddr>,
    /// The user id (token subject), set **only** from a token whose signature verified: the
    /// caller guarantees it. `None` for anonymous or invalid-token requests.
    pub(crate) user_id: Option<String>,
    /// The provider connection id or account id the request is about (from the path, or the
    /// body for the bulk sync endpoints), for the `UserProvider` and `UserAccount` scopes.
    /// Only a UUID counts, in any spelling [`canonical_id`] accepts; anything else is treated
    /// as `None`.
    pub(crate) provider_or_account_id: Option<String>,
}

/// The provider connection named by the body of a bulk sync (`POST /api/v1/accounts/syncs`,
/// `POST /api/v1/transactions/syncs`), which carries no id in its path: the `connection_id`
/// string of a JSON object, for [`RequestIdentity::provider_or_account_id`].
///
/// The id is returned in canonical form (lower-case, hyphenated), so that other spellings of
/// one UUID that the handler accepts cannot open fresh buckets. `None` when the body is not a
/// JSON object, has no string `connection_id`, or the string is not a UUID: the request is
/// then keyed by the user alone (and the handler rejects it).
pub(crate) fn body_connection_id(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Probe {
        connection_id: Option<serde_json::Value>,
    }
    let probe: Probe = serde_json::from_slice(body).ok()?;
    canonical_id(probe.connection_id?.as_str()?)
}

/// The canonical form of an id taken from a request (a path parameter, a body field): the
/// lower-case hyphenated UUID when `raw` parses as one with [`uuid::Uuid::try_parse`] (which
/// accepts upper case, no hyphens, braces and the `urn:uuid:` prefix, as the handlers do);
/// `None` otherwise.
///
/// Bucket keys and identifiers only ever hold this form, so other spellings of one id
/// cannot open fresh buckets.
pub(crate) fn canonical_id(raw: &str) -> Option<String> {
    let id = uuid::Uuid::try_parse(raw).ok()?;
    Some(id.hyphenated().to_string())
}

/// The path a bucket is keyed by: the route template with each path parameter (a whole
/// `{name}` segment) replaced by the [`canonical_id`] of the matching segment of `path`, or
/// left as the `{name}` placeholder when that segment is not a UUID. Static segments come from
/// the template; the query and fragment of `path` are ignored.
///
/// So every spelling of one id shares one bucket, and ids that are not UUIDs (which the
/// handlers refuse anyway) all share the one bucket of the template: a client cannot open an
/// unbounded number of buckets by varying the path. A `path` whose segments do not line up
/// with the template gives the template itself. Applying it to its own output changes nothing.
pub(crate) fn keyed_path(route_template: &str, path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    if !route_template.contains('{') {
        return route_template.to_owned();
    }
    let aligned = route_template.split('/').count() == path.split('/').count();
    let mut values = path.split('/');
    let mut keyed = String::with_capacity(route_template.len() + 36);
    for (index, segment) in route_template.split('/').enumerate() {
        let value = values.next();
        if index > 0 {
            keyed.push('/');
        }
        let is_parameter = segment.starts_with('{') && segment.ends_with('}');
        match value
            .filter(|_| aligned && is_parameter)
            .and_then(canonical_id)
        {
            Some(id) => keyed.push_str(&id),
            None => keyed.push_str(segment),
        }
    }
    keyed
}

/// Identifier used when the client IP is unknown: all such requests share a bucket.
pub(crate) const UNKNOWN_IP: &str = "unknown";

/// Escape `%` and `:` so a caller-influenced part cannot mimic a key separator.
fn escape_key_part(part: &str) -> std::borrow::Cow<'_, str> {
    if part.contains(['%', ':']) {
        part.replace('%', "%25").replace(':', "%3A").into()
    } else {
        part.into()
    }
}

/// Length in bits of the prefix that keys an IPv6 client: a /64 is the smallest network
/// normally assigned to one subscriber or LAN, and a client holding one can pick any of its
/// 2^64 addresses, so keying by the full address would give it unlimited buckets.
pub(crate) const IPV6_CLIENT_PREFIX_LEN: u8 = 64;

/// The identifier of a client address under the `Ip` scope: an IPv4 address as itself (an
/// IPv4-mapped IPv6 address as the IPv4 address it carries), any other IPv6 address as its
/// [`IPV6_CLIENT_PREFIX_LEN`] network in CIDR notation (`2001:db8:1:2::/64`).
pub(crate) fn ip_identifier(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => Ipv6Net::new_assert(v6, IPV6_CLIENT_PREFIX_LEN)
            .trunc()
            .to_string(),
    }
}

/// The scope applied and the bucket identifier for a request under a policy's scope.
///
/// * `Ip`: the client address as [`ip_identifier`] gives it (IPv6 clients by their /64), or
///   [`UNKNOWN_IP`].
/// * `User`: the user id; without one, falls back to `Ip`.
/// * `UserProvider` / `UserAccount`: `user:id` with the id in [`canonical_id`] form; just the
///   user when the request names no provider or account, or names one that is not a UUID
///   (so junk ids all share the user's one bucket); without a user, falls back to `Ip`.
/// * `Global`: `global`.
///
/// User ids have `%` and `:` percent-escaped.
pub(crate) fn resolve_identifier(scope: Scope, identity: &RequestIdentity) -> (Scope, String) {
    let ip = || {
        (
            Scope::Ip,
            identity
                .client_ip
                .map_or_else(|| UNKNOWN_IP.to_owned(), ip_identifier),
        )
    };
    let user = identity.user_id.as_deref().filter(|u| !u.is_empty());
    match scope {
        Scope::Ip => ip(),
        Scope::Global => (Scope::Global, "global".to_owned()),
        Scope::User => match user {
            Some(u) => (Scope::User, escape_key_part(u).into_owned()),
            None => ip(),
        },
        Scope::UserProvider | Scope::UserAccount => match user {
            None => ip(),
            Some(u) => {
                let target = identity
                    .provider_or_account_id
                    .as_deref()
                    .and_then(canonical_id);
                let id = match target {
                    Some(t) => format!("{}:{t}", escape_key_part(u)),
                    None => escape_key_part(u).into_owned(),
                };
                (scope, id)
            }
        },
    }
}

/// The bucket key: `rl:{scope}:{identifier}:{METHOD}:{path}`, the method upper-cased, the
/// scope in lower case ([`Scope::key_str`]), the query (and any fragment) of `path` dropped.
///
/// `path` should be the keyed path ([`keyed_path`]): [`RateLimiter::check_policy`] passes it so.
pub(crate) fn bucket_key(scope: Scope, identifier: &str, method: &str, path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    format!(
        "rl:{}:{identifier}:{}:{path}",
        scope.key_str(),
        method.to_ascii_uppercase()
    )
}

/// Policy lookup, bucket key, store, events and fail-open, for one request at a time.
///
/// Cheap to clone (shares everything).
#[derive(Clone)]
pub(crate) struct RateLimiter {
    policies: Arc<PolicyTable>,
    store: Arc<dyn RateLimitStore>,
    events: Arc<dyn RateLimitEvents>,
    /// The store's outage, shared with the login throttle's watched store.
    outage: Arc<OutageLog>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("policies", &self.policies.len())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter applying `policies` with bucket states in `store`, reporting to `events`,
    /// with an outage log of its own.
    pub(crate) fn new(
        policies: PolicyTable,
        store: Arc<dyn RateLimitStore>,
        events: Arc<dyn RateLimitEvents>,
    ) -> Self {
        Self {
            policies: Arc::new(policies),
            store,
            events,
            outage: rate_limit_outage(),
        }
    }

    /// Logs the store's outages to `outage`, which other users of the store share (pass the
    /// store itself to [`RateLimiter::new`], not a [`WatchedRateLimitStore`] of it, or its
    /// failures are logged without the endpoint).
    pub(crate) fn sharing_outage(mut self, outage: Arc<OutageLog>) -> Self {
        self.outage = outage;
        self
    }

    /// The policies applied.
    pub(crate) fn policies(&self) -> &PolicyTable {
        &self.policies
    }

    /// [`RateLimiter::check_policy`] under the endpoint's policy looked up here; `None` when it
    /// has no policy or a disabled one (not limited).
    #[cfg(test)]
    pub(crate) async fn check(
        &self,
        method: &str,
        route_template: &str,
        path: &str,
        identity: &RequestIdentity,
    ) -> Option<Decision> {
        let (policy, bucket) = self.policies.active(method, route_template)?;
        Some(
            self.check_policy(policy, bucket, method, route_template, path, identity)
                .await,
        )
    }

    /// Check a request to `method route_template` (the router's template, for the policy)
    /// at `path` (as requested, or already canonical).
    ///
    /// The bucket is keyed by the method and [`keyed_path`]`(route_template, path)`: path
    /// parameters in canonical UUID form, those that are not UUIDs as the template's
    /// placeholder, the query ignored. So neither other spellings of an id nor junk ids open
    /// fresh buckets. The identifier is [`resolve_identifier`]'s.
    ///
    /// `policy` and `bucket` are the endpoint's, from [`PolicyTable::active`] (an endpoint
    /// without an active policy is not limited and has no headers). The decision comes after
    /// emitting `RateLimitCheckAttempted` and then
    /// `RateLimitCheckAllowed` or `RateLimitCheckDenied`.
    ///
    /// **Fail-open**: when the store fails (down, timeout, bad reply) the request is allowed
    /// with a full bucket reported (`remaining = limit`, `retry_after_secs = 0`,
    /// `reset_after_secs = 0`, see [`Decision::fail_open`]) and `RateLimitCheckAllowed` is
    /// emitted as for any allowed request. The failure that starts an outage writes the
    /// spec's fail-open record at ERROR, with `endpoint`, `identifier`, `error`,
    /// `layer = "rate_limit"` and `result = "fail_open"`; the later ones are counted, every
    /// 10 s while the outage lasts, and the first check the store answers ends it with one
    /// line ([`OutageLog`]).
    pub(crate) async fn check_policy(
        &self,
        policy: &Policy,
        bucket: &BucketPolicy,
        method: &str,
        route_template: &str,
        path: &str,
        identity: &RequestIdentity,
    ) -> Decision {
        let (scope, identifier) = resolve_identifier(policy.scope, identity);
        let endpoint = format!("{} {route_template}", method.to_ascii_uppercase());
        let key = bucket_key(
            scope,
            &identifier,
            method,
            &keyed_path(route_template, path),
        );
        let scope_name = scope.as_str().to_owned();

        self.events.emit(&RateLimitEvent::Attempted {
            endpoint: endpoint.clone(),
            identifier: identifier.clone(),
            scope: scope_name.clone(),
            cost: bucket.cost(),
        });
        let started = Instant::now();
        let decision = match self.store.check(&key, bucket).await {
            Ok(decision) => {
                self.outage.success();
                decision
            }
            Err(error) => {
                self.outage.failure_started_by(&error, || {
                    tracing::error!(
                        endpoint = %endpoint,
                        identifier = %identifier,
                        error = %error,
                        layer = "rate_limit",
                        result = "fail_open",
                        "rate-limit store outage started: requests are let through without \
                         rate limits (fail-open); logged again every {} s while it lasts",
                        crate::outage::REPORT_EVERY.as_secs(),
                    );
                });
                Decision::fail_open(bucket)
            }
        };
        let execution_time_ms = started.elapsed().as_secs_f64() * 1000.0;
        self.events.emit(&if decision.allowed {
            RateLimitEvent::Allowed {
                endpoint,
                identifier,
                scope: scope_name,
                remaining_tokens: decision.remaining,
                execution_time_ms,
            }
        } else {
            RateLimitEvent::Denied {
                endpoint,
                identifier,
                scope: scope_name,
                retry_after: decision.retry_after_secs,
                execution_time_ms,
            }
        });
        decision
    }
}

#[cfg(test)]
mod redis_tests;
#[cfg(test)]
mod tests;
