//! Configuration of the service: addresses, secrets, lifetimes and limits.
//!
//! ```
//! use aggregation_core::Config;
//! let config = Config::new("https://api.example.com", b"0123456789abcdef0123456789abcdef".to_vec())
//!     .expect("a 32-byte secret");
//! assert_eq!(config.access_token_ttl().as_secs(), 900);
//! ```

use std::time::Duration;

use crate::crypto::Keyring;
use crate::rate_limit::{BucketPolicy, IpNet};

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The JWT secret is shorter than 32 bytes.
    #[error("the JWT secret must be at least 32 bytes long, got {0}")]
    WeakJwtSecret(usize),
    /// The base URL is not an absolute http(s) URL.
    #[error("the base URL must be an absolute http:// or https:// URL, got {0:?}")]
    BaseUrl(String),
    /// A login failure limit with numbers that cannot be used (see [`LoginFailureLimit::new`]).
    #[error("invalid login failure limit: {0}")]
    LoginFailureLimit(&'static str),
}

/// The throttle of failed logins, per account and client network: a token bucket of
/// `max_failures` tokens refilled at `max_failures` per `window` for each account (one
/// normalized email, known or not) and network (the client's IPv4 /24 or IPv6 /64), and one
/// more per account shared by the networks that have not logged in to it within 30 days. Each
/// failed login (unknown email or wrong password) takes a token from its network's bucket and,
/// from such an unknown network, from the shared one; a successful login takes none. While a
/// bucket that concerns the login is empty, it answers exactly as a wrong password does (401
/// `invalid_credentials`), the right password included, until a token is back. A network from
/// which the account logged in within 30 days is never refused because of other networks'
/// failures, so strangers cannot lock an owner out of the networks they use.
///
/// The default, 10 failures refilled at 10 per hour, lets an account's owner mistype a few
/// times, keeps online guessing against one account from unknown networks to about 10
/// passwords an hour (well below the 100 an hour that OWASP ASVS 2.2.1 allows), however many
/// addresses the attacker spreads them over, and frees a network again 6 minutes after the
/// last failure in a burst. Per-IP limits stay as they are.
///
/// ```
/// use std::time::Duration;
/// use aggregation_core::LoginFailureLimit;
///
/// let limit = LoginFailureLimit::new(5, Duration::from_secs(15 * 60)).expect("valid");
/// assert_eq!(limit.max_failures(), 5);
/// assert_eq!(LoginFailureLimit::default().max_failures(), 10);
/// assert!(LoginFailureLimit::new(0, Duration::from_secs(60)).is_err());
/// assert!(LoginFailureLimit::new(5, Duration::ZERO).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginFailureLimit {
    max_failures: u32,
    window: Duration,
}

impl LoginFailureLimit {
    /// Failed logins allowed by default: 10.
    pub const DEFAULT_MAX_FAILURES: u32 = 10;
    /// Time in which the default failures refill: one hour.
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(3600);
    /// The longest window accepted: 30 days.
    pub const MAX_WINDOW: Duration = Duration::from_secs(30 * 24 * 3600);

    /// At most `max_failures` failed logins per account, refilled at `max_failures` per
    /// `window`.
    ///
    /// # Errors
    /// [`ConfigError::LoginFailureLimit`] unless `max_failures >= 1` and
    /// 1 s <= `window` <= [`Self::MAX_WINDOW`].
    pub fn new(max_failures: u32, window: Duration) -> Result<Self, ConfigError> {
        if max_failures == 0 {
            return Err(ConfigError::LoginFailureLimit(
                "max_failures must be at least 1",
            ));
        }
        if window < Duration::from_secs(1) || window > Self::MAX_WINDOW {
            return Err(ConfigError::LoginFailureLimit(
                "window must be between 1 second and 30 days",
            ));
        }
        let limit = Self {
            max_failures,
            window,
        };
        match limit.bucket() {
            Some(_) => Ok(limit),
            None => Err(ConfigError::LoginFailureLimit(
                "the numbers do not make a token bucket",
            )),
        }
    }

    /// Failed logins allowed before the account is throttled.
    pub fn max_failures(&self) -> u32 {
        self.max_failures
    }

    /// Time in which `max_failures` failures refill.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The token bucket: `max_failures` tokens refilled at `max_failures` per `window`, cost
    /// 1. Always `Some` for a limit built by [`Self::new`] or [`Default`].
    pub(crate) fn bucket(&self) -> Option<BucketPolicy> {
        let refill_per_minute = f64::from(self.max_failures) * 60.0 / self.window.as_secs_f64();
        BucketPolicy::new(f64::from(self.max_failures), refill_per_minute, 1).ok()
    }
}

impl Default for LoginFailureLimit {
    /// [`Self::DEFAULT_MAX_FAILURES`] failures per [`Self::DEFAULT_WINDOW`].
    fn default() -> Self {
        Self {
            max_failures: Self::DEFAULT_MAX_FAILURES,
            window: Self::DEFAULT_WINDOW,
        }
    }
}

/// How many jobs of one kind of CPU- and memory-heavy work (password hashing, OFX parsing) run
/// at once, and how many more may wait for a slot. A request that finds the queue full answers
/// 503 `service_unavailable` with `Retry-After: 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkLimits {
    /// Jobs running at once (at least 1).
    pub concurrent: usize,
    /// Jobs waiting for a slot beyond those running.
    pub queued: usize,
}

impl WorkLimits {
    /// Jobs waiting per running slot by default: a second or so of logins at 19 MiB argon2.
    pub const DEFAULT_QUEUED_PER_SLOT: usize = 32;

    /// One running job per available core, [`Self::DEFAULT_QUEUED_PER_SLOT`] waiting per core.
    pub fn per_core() -> Self {
        let concurrent = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            concurrent,
            queued: concurrent.saturating_mul(Self::DEFAULT_QUEUED_PER_SLOT),
        }
    }
}

/// Settings of the service. Every lifetime and limit has the spec's default.
#[derive(Clone)]
pub struct Config {
    base_url: String,
    jwt_secret: Vec<u8>,
    jwt_issuer: String,
    jwt_audience: String,
    access_token_ttl: Duration,
    refresh_token_ttl: Duration,
    verification_token_ttl: Duration,
    reset_token_ttl: Duration,
    reset_emails_per_hour: u32,
    rotation_grace: Duration,
    max_body_bytes: usize,
    max_upload_bytes: usize,
    mail_from: String,
    refresh_reuse_interval: Duration,
    session_max_lifetime: Duration,
    trusted_proxies: Vec<IpNet>,
    admin_emails: Vec<String>,
    refresh_provider_tokens_every: Option<Duration>,
    purge_expired_every: Option<Duration>,
    sync_connections_every: Option<Duration>,
    purge_retention: Duration,
    audit_retention: Duration,
    job_lease_ttl: Duration,
    keyring: Keyring,
    oauth_redirect_uris: Vec<String>,
    oauth_state_ttl: Duration,
    oauth_callback_requires_auth: bool,
    sync_cooldown: Duration,
    transactions_sync_window_days: u32,
    token_refresh_margin: Duration,
    hashing_limits: WorkLimits,
    parsing_limits: WorkLimits,
    login_failure_limit: Option<LoginFailureLimit>,
    event_stream_heartbeat: Duration,
    event_streams_per_user: usize,
    max_accounts_per_user: u64,
    webhooks: WebhookSettings,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("base_url", &self.base_url)
            .field("jwt_secret", &"<redacted>")
            .field("jwt_issuer", &self.jwt_issuer)
            .field("access_token_ttl", &self.access_token_ttl)
            .field("refresh_token_ttl", &self.refresh_token_ttl)
            .field("refresh_reuse_interval", &self.refresh_reuse_interval)
            .field("session_max_lifetime", &self.session_max_lifetime)
            .field("rotation_grace", &self.rotation_grace)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_upload_bytes", &self.max_upload_bytes)
            .field("admin_emails", &self.admin_emails)
            .field(
                "refresh_provider_tokens_every",
                &self.refresh_provider_tokens_every,
            )
            .field("purge_expired_every", &self.purge_expired_every)
            .field("sync_connections_every", &self.sync_connections_every)
            .field("audit_retention", &self.audit_retention)
            .field("keyring", &self.keyring)
            .field("oauth_redirect_uris", &self.oauth_redirect_uris)
            .field("oauth_state_ttl", &self.oauth_state_ttl)
            .field(
                "oauth_callback_requires_auth",
                &self.oauth_callback_requires_auth,
            )
            .field("hashing_limits", &self.hashing_limits)
            .field("parsing_limits", &self.parsing_limits)
            .field("login_failure_limit", &self.login_failure_limit)
            .field("event_stream_heartbeat", &self.event_stream_heartbeat)
            .field("event_streams_per_user", &self.event_streams_per_user)
            .field("max_accounts_per_user", &self.max_accounts_per_user)
            .field("webhooks", &self.webhooks)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// A configuration with the spec's defaults.
    ///
    /// `base_url` prefixes problem `type`s and links in emails; `jwt_secret` signs access tokens
    /// (HS256) and must be at least 32 bytes.
    pub fn new(base_url: impl Into<String>, jwt_secret: Vec<u8>) -> Result<Self, ConfigError> {
        let base_url = base_url.into().trim_end_matches('/').to_owned();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://"))
            || base_url.len() <= "https://".len()
        {
            return Err(ConfigError::BaseUrl(base_url));
        }
        if jwt_secret.len() < 32 {
            return Err(ConfigError::WeakJwtSecret(jwt_secret.len()));
        }
        Ok(Self {
            jwt_issuer: base_url.clone(),
            jwt_audience: format!("{base_url}/api/v1"),
            base_url,
            jwt_secret,
            access_token_ttl: Duration::from_secs(900),
            refresh_token_ttl: Duration::from_secs(30 * 24 * 3600),
            verification_token_ttl: Duration::from_secs(24 * 3600),
            reset_token_ttl: Duration::from_secs(15 * 60),
            reset_emails_per_hour: 3,
            rotation_grace: Duration::from_secs(300),
            max_body_bytes: 1024 * 1024,
            max_upload_bytes: 10 * 1024 * 1024,
            mail_from: "noreply@localhost".to_owned(),
            refresh_reuse_interval: Duration::from_secs(2),
            session_max_lifetime: Duration::from_secs(90 * 24 * 3600),
            trusted_proxies: Vec::new(),
            admin_emails: Vec::new(),
            refresh_provider_tokens_every: Some(Duration::from_secs(5 * 60)),
            purge_expired_every: Some(Duration::from_secs(3600)),
            sync_connections_every: None,
            purge_retention: Duration::from_secs(30 * 24 * 3600),
            audit_retention: Duration::from_secs(365 * 24 * 3600),
            job_lease_ttl: Duration::from_secs(60),
            keyring: Keyring::default(),
            oauth_redirect_uris: Vec::new(),
            oauth_state_ttl: Duration::from_secs(600),
            oauth_callback_requires_auth: false,
            sync_cooldown: Duration::from_secs(300),
            transactions_sync_window_days: 90,
            token_refresh_margin: Duration::from_secs(300),
            hashing_limits: WorkLimits::per_core(),
            parsing_limits: WorkLimits::per_core(),
            login_failure_limit: Some(LoginFailureLimit::default()),
            event_stream_heartbeat: Duration::from_secs(15),
            event_streams_per_user: 5,
            max_accounts_per_user: Self::DEFAULT_MAX_ACCOUNTS_PER_USER,
            webhooks: WebhookSettings::default(),
        })
    }

    /// Sets the keys that encrypt provider credentials (none by default: connecting a
    /// provider then fails with 500 `command_execution_failed`).
    #[must_use]
    pub fn with_keyring(mut self, keyring: Keyring) -> Self {
        self.keyring = keyring;
        self
    }

    /// Sets the redirect URIs a connect request may name; the first is used when it names
    /// none. With none configured, connecting a provider is refused (422).
    #[must_use]
    pub fn with_oauth_redirect_uris(mut self, uris: Vec<String>) -> Self {
        self.oauth_redirect_uris = uris;
        self
    }

    /// Sets how long an OAuth state stays valid (default 600 s).
    #[must_use]
    pub fn with_oauth_state_ttl(mut self, ttl: Duration) -> Self {
        self.oauth_state_ttl = ttl;
        self
    }

    /// Sets whether `POST /api/v1/providers/callback` must carry the bearer access token of the
    /// user who started the connection (default `false`, the interface's public callback).
    ///
    /// When `true`, a callback without a valid bearer token answers 401 `unauthorized`, and
    /// one with another user's token answers exactly as an unknown state does (400
    /// `command_validation_failed`), so a stolen state and code are of no use to anyone but
    /// the user who started connecting, and nobody learns whether a state exists. Either way
    /// a bearer token that is sent must be the state's user's.
    #[must_use]
    pub fn with_oauth_callback_requires_auth(mut self, required: bool) -> Self {
        self.oauth_callback_requires_auth = required;
        self
    }

    /// Whether the OAuth callback requires the bearer token of the user who started it.
    pub fn oauth_callback_requires_auth(&self) -> bool {
        self.oauth_callback_requires_auth
    }

    /// Sets the minimum time between two syncs of one subject without `force` (default 300 s).
    #[must_use]
    pub fn with_sync_cooldown(mut self, cooldown: Duration) -> Self {
        self.sync_cooldown = cooldown;
        self
    }

    /// Sets how many days back a transactions sync without `start_date` reaches (default 90).
    #[must_use]
    pub fn with_transactions_sync_window_days(mut self, days: u32) -> Self {
        self.transactions_sync_window_days = days;
        self
    }

    /// Sets how long before expiry provider tokens are refreshed (default 300 s).
    #[must_use]
    pub fn with_token_refresh_margin(mut self, margin: Duration) -> Self {
        self.token_refresh_margin = margin;
        self
    }

    /// The keys that encrypt provider credentials.
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }

    /// The redirect URIs a connect request may name, the default first.
    pub fn oauth_redirect_uris(&self) -> &[String] {
        &self.oauth_redirect_uris
    }

    /// How long an OAuth state stays valid.
    pub fn oauth_state_ttl(&self) -> Duration {
        self.oauth_state_ttl
    }

    /// The minimum time between two syncs of one subject without `force`.
    pub fn sync_cooldown(&self) -> Duration {
        self.sync_cooldown
    }

    /// How many days back a transactions sync without `start_date` reaches.
    pub fn transactions_sync_window_days(&self) -> u32 {
        self.transactions_sync_window_days
    }

    /// How long before expiry provider tokens are refreshed.
    pub fn token_refresh_margin(&self) -> Duration {
        self.token_refresh_margin
    }

    /// Sets the grace period after a global token rotation (default 300 s).
    #[must_use]
    pub fn with_rotation_grace(mut self, grace: Duration) -> Self {
        self.rotation_grace = grace;
        self
    }

    /// Sets how many password hashes run at once and how many may wait (login, registration and
    /// password reset each hash once).
    #[must_use]
    pub fn with_hashing_limits(mut self, limits: WorkLimits) -> Self {
        self.hashing_limits = limits;
        self
    }

    /// Sets the per-account throttle of failed logins (default
    /// [`LoginFailureLimit::default`]: 10 failures, refilled at 10 per hour); `None` turns it
    /// off. Its buckets live in the service's rate-limit store, so they are shared through
    /// Redis when that is configured.
    #[must_use]
    pub fn with_login_failure_limit(mut self, limit: Option<LoginFailureLimit>) -> Self {
        self.login_failure_limit = limit;
        self
    }

    /// The per-account throttle of failed logins; `None` when off.
    pub fn login_failure_limit(&self) -> Option<LoginFailureLimit> {
        self.login_failure_limit
    }

    /// Sets how many large OFX uploads are parsed at once and how many may wait.
    #[must_use]
    pub fn with_parsing_limits(mut self, limits: WorkLimits) -> Self {
        self.parsing_limits = limits;
        self
    }

    /// Sets the emails that receive the `admin` role once the account has verified the email
    /// (compared trimmed and case-insensitively); not at registration, since whoever registers
    /// an address first has not proven they own it. Existing verified accounts are granted it
    /// with [`crate::AggregationService::grant_configured_admins`].
    #[must_use]
    pub fn with_admin_emails(mut self, emails: Vec<String>) -> Self {
        self.admin_emails = emails
            .iter()
            .map(|email| crate::email::normalize_email(email))
            .filter(|email| !email.is_empty())
            .collect();
        self
    }

    /// Sets how often `refresh_provider_tokens` runs (default every 5 min; `None` turns it off).
    #[must_use]
    pub fn with_refresh_provider_tokens_every(mut self, every: Option<Duration>) -> Self {
        self.refresh_provider_tokens_every = every;
        self
    }

    /// Sets how often `purge_expired` runs (default hourly; `None` turns it off).
    #[must_use]
    pub fn with_purge_expired_every(mut self, every: Option<Duration>) -> Self {
        self.purge_expired_every = every;
        self
    }

    /// Sets how often `sync_connections` runs (default `None`: off).
    #[must_use]
    pub fn with_sync_connections_every(mut self, every: Option<Duration>) -> Self {
        self.sync_connections_every = every;
        self
    }

    /// Sets how long revoked or expired sessions are kept before `purge_expired` deletes them
    /// (default 30 days).
    #[must_use]
    pub fn with_purge_retention(mut self, retention: Duration) -> Self {
        self.purge_retention = retention;
        self
    }

    /// Sets how long durable events (the audit trail of `GET /api/v1/admin/audit-events`) are
    /// kept before `purge_expired` deletes them (default 365 days).
    #[must_use]
    pub fn with_audit_retention(mut self, retention: Duration) -> Self {
        self.audit_retention = retention;
        self
    }

    /// Sets the lifetime of a job lease (default 60 s). A running job renews its lease every
    /// third of it; the lease of an instance that died mid-run lapses after at most this long.
    #[must_use]
    pub fn with_job_lease_ttl(mut self, ttl: Duration) -> Self {
        self.job_lease_ttl = ttl.max(Duration::from_millis(300));
        self
    }

    /// Sets how often an idle event stream (`GET /api/v1/events`) sends a heartbeat comment
    /// (default 15 s; at least 10 ms), so that proxies keep the connection and clients notice a
    /// dead one.
    #[must_use]
    pub fn with_event_stream_heartbeat(mut self, every: Duration) -> Self {
        self.event_stream_heartbeat = every.max(Duration::from_millis(10));
        self
    }

    /// The heartbeat interval of an idle event stream.
    pub fn event_stream_heartbeat(&self) -> Duration {
        self.event_stream_heartbeat
    }

    /// Sets how many event streams one user may hold open on this instance at once (default
    /// 5; at least 1); one more is refused with 429.
    #[must_use]
    pub fn with_event_streams_per_user(mut self, streams: usize) -> Self {
        self.event_streams_per_user = streams.max(1);
        self
    }

    /// How many event streams one user may hold open on this instance at once.
    pub fn event_streams_per_user(&self) -> usize {
        self.event_streams_per_user
    }

    /// The default of [`Config::max_accounts_per_user`].
    pub const DEFAULT_MAX_ACCOUNTS_PER_USER: u64 = 10_000;

    /// Sets the most accounts one user may hold (default 10,000; at least 1). An import or a
    /// provider sync that would create accounts beyond it is refused (422) and writes nothing.
    #[must_use]
    pub fn with_max_accounts_per_user(mut self, accounts: u64) -> Self {
        self.max_accounts_per_user = accounts.max(1);
        self
    }

    /// The most accounts one user may hold.
    pub fn max_accounts_per_user(&self) -> u64 {
        self.max_accounts_per_user
    }

    /// Sets the largest accepted JSON body (default 1 MiB).
    #[must_use]
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the largest accepted upload (default 10 MiB).
    #[must_use]
    pub fn with_max_upload_bytes(mut self, bytes: usize) -> Self {
        self.max_upload_bytes = bytes;
        self
    }

    /// Sets the sender mailbox of emails (default `noreply@localhost`).
    #[must_use]
    pub fn with_mail_from(mut self, from: impl Into<String>) -> Self {
        self.mail_from = from.into();
        self
    }

    /// Sets the access-token lifetime (default 900 s).
    #[must_use]
    pub fn with_access_token_ttl(mut self, ttl: Duration) -> Self {
        self.access_token_ttl = ttl;
        self
    }

    /// Sets the password-reset token lifetime (default 15 min).
    #[must_use]
    pub fn with_reset_token_ttl(mut self, ttl: Duration) -> Self {
        self.reset_token_ttl = ttl;
        self
    }

    /// Sets the verification token lifetime (default 24 h).
    #[must_use]
    pub fn with_verification_token_ttl(mut self, ttl: Duration) -> Self {
        self.verification_token_ttl = ttl;
        self
    }

    /// Sets how long after a refresh token was rotated away presenting it again is taken for
    /// a concurrent refresh that lost the race rather than for reuse (default 2 s): within it
    /// the answer is 401 and the session stays; after it the session is revoked.
    #[must_use]
    pub fn with_refresh_reuse_interval(mut self, interval: Duration) -> Self {
        self.refresh_reuse_interval = interval;
        self
    }

    /// Sets the absolute lifetime of a session (default 90 days): however often its refresh
    /// token is rotated, refreshing answers 401 once this long has passed since login.
    #[must_use]
    pub fn with_session_max_lifetime(mut self, lifetime: Duration) -> Self {
        self.session_max_lifetime = lifetime;
        self
    }

    /// Sets the proxies whose `X-Forwarded-For` header is read to find the client address
    /// (default none: the peer address is the client).
    #[must_use]
    pub fn with_trusted_proxies(mut self, proxies: Vec<IpNet>) -> Self {
        self.trusted_proxies = proxies;
        self
    }

    /// Proxies whose `X-Forwarded-For` is believed.
    pub fn trusted_proxies(&self) -> &[IpNet] {
        &self.trusted_proxies
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The HS256 secret of access tokens.
    pub(crate) fn jwt_secret(&self) -> &[u8] {
        &self.jwt_secret
    }

    /// The `iss` claim of access tokens.
    pub fn jwt_issuer(&self) -> &str {
        &self.jwt_issuer
    }

    /// The `aud` claim of access tokens.
    pub fn jwt_audience(&self) -> &str {
        &self.jwt_audience
    }

    /// Lifetime of access tokens.
    pub fn access_token_ttl(&self) -> Duration {
        self.access_token_ttl
    }

    /// Lifetime of refresh tokens.
    pub fn refresh_token_ttl(&self) -> Duration {
        self.refresh_token_ttl
    }

    /// Absolute lifetime of a session, counted from login.
    pub fn session_max_lifetime(&self) -> Duration {
        self.session_max_lifetime
    }

    /// Lifetime of email verification tokens.
    pub fn verification_token_ttl(&self) -> Duration {
        self.verification_token_ttl
    }

    /// Lifetime of password reset tokens.
    pub fn reset_token_ttl(&self) -> Duration {
        self.reset_token_ttl
    }

    /// Password reset emails sent per user per hour at most.
    pub fn reset_emails_per_hour(&self) -> u32 {
        self.reset_emails_per_hour
    }

    /// Grace period after a global rotation.
    pub fn rotation_grace(&self) -> Duration {
        self.rotation_grace
    }

    /// Largest JSON body.
    pub fn max_body_bytes(&self) -> usize {
        self.max_body_bytes
    }

    /// Largest upload.
    pub fn max_upload_bytes(&self) -> usize {
        self.max_upload_bytes
    }

    /// Sender mailbox.
    pub fn mail_from(&self) -> &str {
        &self.mail_from
    }

    /// How long after its rotation a rotated-away refresh token is refused without revoking
    /// its session.
    pub fn refresh_reuse_interval(&self) -> Duration {
        self.refresh_reuse_interval
    }

    /// Bounds on password hashing (login, registration, password reset). Default:
    /// [`WorkLimits::per_core`].
    pub fn hashing_limits(&self) -> WorkLimits {
        self.hashing_limits
    }

    /// Bounds on OFX parsing of large uploads. Default: [`WorkLimits::per_core`].
    pub fn parsing_limits(&self) -> WorkLimits {
        self.parsing_limits
    }

    /// Emails (normalized) that receive the `admin` role once verified.
    pub fn admin_emails(&self) -> &[String] {
        &self.admin_emails
    }

    /// Whether this email is one of [`Config::admin_emails`].
    pub fn is_admin_email(&self, email: &str) -> bool {
        let email = crate::email::normalize_email(email);
        self.admin_emails.contains(&email)
    }

    /// Interval of `refresh_provider_tokens`; `None` when off.
    pub fn refresh_provider_tokens_every(&self) -> Option<Duration> {
        self.refresh_provider_tokens_every
    }

    /// Interval of `purge_expired`; `None` when off.
    pub fn purge_expired_every(&self) -> Option<Duration> {
        self.purge_expired_every
    }

    /// Interval of `sync_connections`; `None` when off.
    pub fn sync_connections_every(&self) -> Option<Duration> {
        self.sync_connections_every
    }

    /// How long revoked or expired sessions are kept.
    pub fn purge_retention(&self) -> Duration {
        self.purge_retention
    }

    /// How long durable events (the audit trail) are kept.
    pub fn audit_retention(&self) -> Duration {
        self.audit_retention
    }

    /// Lifetime of a job lease.
    pub fn job_lease_ttl(&self) -> Duration {
        self.job_lease_ttl
    }
}

/// How webhooks are delivered (see [`Config::with_webhook_allow_private`] and the settings
/// beside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WebhookSettings {
    allow_private: bool,
    max_age: Duration,
    first_retry: Duration,
    max_retry_delay: Duration,
    deliver_every: Option<Duration>,
    disable_after: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            allow_private: false,
            max_age: Duration::from_secs(24 * 3600),
            first_retry: Duration::from_secs(10),
            max_retry_delay: Duration::from_secs(3600),
            deliver_every: Some(Duration::from_secs(5)),
            disable_after: Duration::from_secs(24 * 3600),
        }
    }
}

impl Config {
    /// Sets whether webhooks may be registered for and delivered to loopback, private,
    /// link-local and other non-public addresses (default `false`; the reference server's
    /// `AGG_WEBHOOK_ALLOW_PRIVATE=1`). Meant for receivers on the host's own network; anyone
    /// who can register a webhook can then make the service send requests there. Cloud
    /// metadata services (169.254.169.254, fd00:ec2::254, 100.100.100.200 and the like, in
    /// every spelling) and unspecified, multicast and broadcast addresses stay refused.
    #[must_use]
    pub fn with_webhook_allow_private(mut self, allow: bool) -> Self {
        self.webhooks.allow_private = allow;
        self
    }

    /// Whether webhooks may reach non-public addresses.
    pub fn webhook_allow_private(&self) -> bool {
        self.webhooks.allow_private
    }

    /// Sets how long a webhook delivery is retried, counted from the event (default 24 h):
    /// an attempt that fails after this age is the last.
    #[must_use]
    pub fn with_webhook_max_age(mut self, max_age: Duration) -> Self {
        self.webhooks.max_age = max_age;
        self
    }

    /// How long a webhook delivery is retried.
    pub fn webhook_max_age(&self) -> Duration {
        self.webhooks.max_age
    }

    /// Sets the delay before the second attempt of a failed webhook delivery (default 10 s)
    /// and the longest delay between attempts (default 1 h); each retry waits twice as long
    /// as the one before, up to that longest delay. Zero retries at the next delivery pass
    /// (a run of the delivery job, or the delivery that follows a commit).
    #[must_use]
    pub fn with_webhook_retry_delays(mut self, first: Duration, max: Duration) -> Self {
        self.webhooks.first_retry = first;
        self.webhooks.max_retry_delay = max.max(first);
        self
    }

    /// The delay before the second attempt of a failed webhook delivery.
    pub fn webhook_first_retry(&self) -> Duration {
        self.webhooks.first_retry
    }

    /// The longest delay between two attempts of a webhook delivery.
    pub fn webhook_max_retry_delay(&self) -> Duration {
        self.webhooks.max_retry_delay
    }

    /// Sets how often `deliver_webhooks` runs (default every 5 s; `None` turns it off).
    ///
    /// Deliveries do not wait for it: while it is on, the running jobs
    /// ([`JobRunner::spawn`](crate::JobRunner::spawn)) start each event's deliveries right after
    /// its commit, and the job retries failed ones once their backoff is due and sends those of
    /// events raised on instances that do not run the jobs. `None` turns both off (deliveries
    /// stay queued).
    #[must_use]
    pub fn with_deliver_webhooks_every(mut self, every: Option<Duration>) -> Self {
        self.webhooks.deliver_every = every;
        self
    }

    /// Interval of `deliver_webhooks`; `None` when off.
    pub fn deliver_webhooks_every(&self) -> Option<Duration> {
        self.webhooks.deliver_every
    }

    /// Sets how long a webhook endpoint may fail every attempt before it is disabled
    /// (default 24 h, counted from the first failure after its last success). A disabled
    /// endpoint receives nothing until its owner enables it again.
    #[must_use]
    pub fn with_webhook_disable_after(mut self, after: Duration) -> Self {
        self.webhooks.disable_after = after;
        self
    }

    /// How long a webhook endpoint may fail every attempt before it is disabled.
    pub fn webhook_disable_after(&self) -> Duration {
        self.webhooks.disable_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_failure_limits() {
        let default = LoginFailureLimit::default();
        assert_eq!(
            (default.max_failures(), default.window()),
            (10, Duration::from_secs(3600))
        );
        let bucket = default.bucket().expect("the default is a valid bucket");
        assert_eq!(bucket.max_tokens(), 10.0);
        assert!((bucket.refill_rate() - 10.0 / 60.0).abs() < 1e-12);
        assert_eq!(bucket.cost(), 1);
        assert_eq!(bucket.ttl_secs(), 3600 + 60);
        let config = Config::new("https://api.example.com", vec![0; 32]).expect("config");
        assert_eq!(config.login_failure_limit(), Some(default));
        assert_eq!(
            config.with_login_failure_limit(None).login_failure_limit(),
            None
        );
        assert!(LoginFailureLimit::new(1, Duration::from_secs(1)).is_ok());
        assert!(LoginFailureLimit::new(u32::MAX, LoginFailureLimit::MAX_WINDOW).is_ok());
        for (failures, window) in [
            (0, Duration::from_secs(60)),
            (3, Duration::ZERO),
            (3, Duration::from_millis(999)),
            (3, LoginFailureLimit::MAX_WINDOW + Duration::from_secs(1)),
        ] {
            let error = LoginFailureLimit::new(failures, window).unwrap_err();
            assert!(
                matches!(error, ConfigError::LoginFailureLimit(_)),
                "{error}"
            );
        }
    }
}
