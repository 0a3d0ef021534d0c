//! Storage: one trait per aggregate, and the SQLite and PostgreSQL backends over sqlx.
//!
//! The service holds one [`Store`], the sum of every aggregate trait. Both backends implement all
//! of them with the same SQL, so behaviour cannot drift between them.
//!
//! ```no_run
//! # async fn demo() -> Result<(), aggregation_core::store::StoreError> {
//! use aggregation_core::store::SqliteStore;
//! let store = SqliteStore::in_memory().await?;
//! store.migrate().await?;
//! # Ok(()) }
//! ```

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::enums::string_enum;
use crate::events::{Event, RaiseEvents};

#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod event_tests;
mod events;
mod guard;
#[cfg(test)]
#[cfg(feature = "sqlite")]
mod import_tests;
mod imports;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod login_network_tests;
mod login_networks;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod migrate_tests;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod provider_tests;
mod providers;
mod records;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod webhook_tests;
mod webhooks;

pub use events::{AuditFilter, EventStore};
pub(crate) use guard::GuardedStore;
pub use imports::{
    FILE_IMPORT_PROVIDER, ImportAccount, ImportBatch, ImportCounts, ImportInstitution,
    ImportSnapshot, ImportStore,
};
pub use login_networks::LoginNetworkStore;
#[cfg(feature = "postgres")]
pub use postgres::{InvalidSchemaName, PostgresStore, PostgresStoreBuilder, SchemaName};
pub use providers::{
    EncryptedCredentials, NewOAuthState, OAuthStateRecord, ProviderConnectionStore,
    SyncAccountData, SyncBatch, SyncClaim, SyncCounts, SyncKind, SyncSnapshot, SyncStore,
};
pub use records::{
    AccountFilter, AccountRecord, AccountStore, AccountType, AssetType, ConnectionRecord,
    ConnectionStatus, ConnectionStore, HoldingFilter, HoldingRecord, HoldingStore, NewAccount,
    NewConnection, NewHolding, NewSnapshot, NewTransaction, Page, SnapshotRecord, SnapshotSource,
    SnapshotStore, TransactionPosition, TransactionQuery, TransactionRecord, TransactionStatus,
    TransactionStore, TransactionType, UpsertCounts, mask_account_number, provider_id,
};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use webhooks::{
    ClaimedDelivery, DeliveryClaim, DeliveryStatus, DisabledWebhook, NewWebhookEndpoint,
    NextDelivery, WebhookAttempt, WebhookAttemptRecord, WebhookDeliveryRecord,
    WebhookEndpointRecord, WebhookStore,
};

/// A coarse storage failure; backends log their detail and convert it into one of these.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be reached or talked to, or did not answer in time (answered
    /// as 503 with `Retry-After`). Calls failing with it in a row open the service's circuit
    /// breaker, so return it only when the store itself is at fault, never for a bad row.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// A uniqueness rule was broken (for example, an email already registered).
    #[error("conflict: {0}")]
    Conflict(String),
    /// Anything else (answered as 500, never shown to clients).
    #[error("store failure: {0}")]
    Other(String),
}

string_enum! {
    /// A role held by a user.
    Role {
        /// Every user.
        User => "user",
        /// Administrators.
        Admin => "admin",
    }
}

/// A stored user.
#[derive(Debug, Clone)]
#[cfg_attr(sql, derive(sqlx::FromRow))]
pub struct UserRecord {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Email as given at registration.
    pub email: String,
    /// Argon2id PHC string.
    pub password_hash: String,
    /// When the email was verified, if it was.
    pub email_verified_at: Option<DateTime<Utc>>,
    /// The user's minimum refresh-token version.
    pub min_token_version: i64,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A user to create.
#[derive(Debug, Clone)]
pub struct NewUser {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Email as given.
    pub email: String,
    /// Trimmed, lowercased email: the uniqueness key.
    pub email_normalized: String,
    /// Argon2id PHC string.
    pub password_hash: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

string_enum! {
    /// What a single-use token is for.
    TokenPurpose {
        /// Proves ownership of an email address.
        EmailVerification => "email_verification",
        /// Allows setting a new password.
        PasswordReset => "password_reset",
    }
}

/// A single-use token to store (only its digest).
#[derive(Debug, Clone)]
pub struct NewOneTimeToken {
    /// SHA-256 of the token.
    pub digest: Vec<u8>,
    /// What it is for.
    pub purpose: TokenPurpose,
    /// Whose it is.
    pub user_id: Uuid,
    /// Issue time.
    pub created_at: DateTime<Utc>,
    /// Expiry.
    pub expires_at: DateTime<Utc>,
    /// Client IP of the request that asked for it.
    pub ip_address: Option<String>,
    /// User-Agent of that request.
    pub user_agent: Option<String>,
}

/// The state of a single-use token when it was presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenCheck {
    /// Valid and now consumed; the operation was applied for this user.
    Consumed {
        /// The token's user.
        user_id: Uuid,
    },
    /// Valid, not consumed (a look-ahead before expensive work).
    Valid {
        /// The token's user.
        user_id: Uuid,
    },
    /// No such token.
    Unknown,
    /// Past its expiry.
    Expired,
    /// Already used.
    AlreadyUsed,
    /// The token's user no longer exists.
    UnknownUser,
}

/// A stored session.
#[derive(Debug, Clone)]
#[cfg_attr(sql, derive(sqlx::FromRow))]
pub struct SessionRecord {
    /// Id.
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// Short device description parsed from the User-Agent.
    pub device_info: Option<String>,
    /// Client IP at login.
    pub ip_address: Option<String>,
    /// Location, when a GeoIP database is configured.
    pub location: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last login or refresh.
    pub last_activity_at: DateTime<Utc>,
    /// Expiry of its live refresh token.
    pub expires_at: DateTime<Utc>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Why it was revoked.
    pub revoked_reason: Option<String>,
}

/// A session to create.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// Id.
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// Short device description.
    pub device_info: Option<String>,
    /// Client IP.
    pub ip_address: Option<String>,
    /// Raw User-Agent, cut to 512 characters.
    pub user_agent: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Expiry.
    pub expires_at: DateTime<Utc>,
}

/// A refresh token to store (only its digest).
#[derive(Debug, Clone)]
pub struct NewRefreshToken {
    /// SHA-256 of the token.
    pub digest: Vec<u8>,
    /// Its session.
    pub session_id: Uuid,
    /// Its user.
    pub user_id: Uuid,
    /// The token version stamped at issue.
    pub token_version: i64,
    /// Issue time.
    pub issued_at: DateTime<Utc>,
    /// Expiry.
    pub expires_at: DateTime<Utc>,
}

/// A stored refresh token with the state of its session.
#[derive(Debug, Clone)]
#[cfg_attr(sql, derive(sqlx::FromRow))]
pub struct RefreshTokenRecord {
    /// Its session.
    pub session_id: Uuid,
    /// Its user.
    pub user_id: Uuid,
    /// Version stamped at issue.
    pub token_version: i64,
    /// Expiry.
    pub expires_at: DateTime<Utc>,
    /// When it was exchanged for a new one.
    pub rotated_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// When its session was revoked.
    pub session_revoked_at: Option<DateTime<Utc>>,
    /// When its session began (login): the start of the session's absolute lifetime.
    pub session_created_at: DateTime<Utc>,
}

/// Users and their roles.
#[async_trait]
pub trait UserStore: Send + Sync {
    /// Creates a user with the `user` role. [`StoreError::Conflict`] when the normalized email
    /// is taken. Atomic: the user and the role row are written together or not at all.
    async fn create_user(&self, user: &NewUser) -> Result<(), StoreError>;

    /// The user with this normalized email; `None` when there is none.
    async fn user_by_email(&self, email_normalized: &str)
    -> Result<Option<UserRecord>, StoreError>;

    /// The user with this id; `None` when there is none.
    async fn user_by_id(&self, id: Uuid) -> Result<Option<UserRecord>, StoreError>;

    /// The user's roles (always including [`Role::User`] for an existing user); empty for an
    /// unknown user.
    async fn user_roles(&self, id: Uuid) -> Result<Vec<Role>, StoreError>;

    /// Grants a role; `false` when the user already had it. Unknown user: `Ok(false)`.
    async fn grant_role(&self, id: Uuid, role: Role, at: DateTime<Utc>)
    -> Result<bool, StoreError>;

    /// Answers whether the store can be reached.
    async fn ping(&self) -> Result<(), StoreError>;
}

/// Single-use email tokens (verification and password reset).
#[async_trait]
pub trait OneTimeTokenStore: Send + Sync {
    /// Stores a new token digest.
    async fn insert_one_time_token(&self, token: &NewOneTimeToken) -> Result<(), StoreError>;

    /// Stores a new token digest unless the user was already issued `cap` tokens of this
    /// purpose since `since`; `false` when capped. Atomic per user: concurrent calls never
    /// exceed the cap.
    async fn insert_one_time_token_capped(
        &self,
        token: &NewOneTimeToken,
        cap: u64,
        since: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Looks at a token without consuming it: `Valid`, `Unknown`, `Expired`, `AlreadyUsed` or
    /// `UnknownUser`.
    async fn check_one_time_token(
        &self,
        digest: &[u8],
        purpose: TokenPurpose,
        now: DateTime<Utc>,
    ) -> Result<TokenCheck, StoreError>;

    /// Consumes a verification token and marks the user's email verified, atomically.
    /// Of concurrent calls with one token exactly one gets `Consumed`.
    async fn verify_email(
        &self,
        digest: &[u8],
        now: DateTime<Utc>,
    ) -> Result<TokenCheck, StoreError>;

    /// Consumes a reset token, sets the new password hash and revokes every session of the
    /// user with their refresh tokens (reason `password_reset`), atomically. Then, in the same
    /// transaction, calls `raise` with the user and the sessions that were live, and writes
    /// the events it returns. The events written come back with the check (none unless
    /// `Consumed`).
    async fn reset_password(
        &self,
        digest: &[u8],
        password_hash: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
    ) -> Result<(TokenCheck, Vec<Event>), StoreError>;
}

/// The live sessions a revocation revoked: what its events are raised from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevokedSessions {
    /// Their user.
    pub user_id: Uuid,
    /// The sessions that were live (neither revoked nor expired), in id order.
    pub session_ids: Vec<Uuid>,
}

/// Sessions and their refresh tokens.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates a session and its first refresh token, atomically.
    async fn create_session(
        &self,
        session: &NewSession,
        token: &NewRefreshToken,
    ) -> Result<(), StoreError>;

    /// The refresh token with this digest, with its session's state; `None` when unknown.
    async fn refresh_token(&self, digest: &[u8]) -> Result<Option<RefreshTokenRecord>, StoreError>;

    /// Exchanges a live refresh token for a new one, atomically: marks the old one rotated
    /// (only if it is neither rotated, revoked nor expired and its session is not revoked),
    /// stores the new one and moves the session's expiry and last activity.
    /// `false` when the old token was no longer live (a concurrent refresh won).
    async fn rotate_refresh_token(
        &self,
        old_digest: &[u8],
        new_token: &NewRefreshToken,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Revokes a session of this user and its refresh tokens and, when it was not revoked
    /// already, writes the events `raise` returns for it (called in the transaction),
    /// atomically. `None`: no such session for this user; `Some(events)`: the events
    /// written, none when it was already revoked.
    async fn revoke_session(
        &self,
        user_id: Uuid,
        session_id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
    ) -> Result<Option<Vec<Event>>, StoreError>;

    /// Revokes the session of the refresh token with this digest, if the token belongs to the
    /// user, and writes the events `raise` returns for it, like
    /// [`revoke_session`](Self::revoke_session). `None` when the token is unknown or another
    /// user's; `Some(events)`: the events written.
    async fn revoke_session_by_token(
        &self,
        user_id: Uuid,
        digest: &[u8],
        reason: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
    ) -> Result<Option<Vec<Event>>, StoreError>;

    /// Revokes every session of the user except `keep`, with their tokens (expired ones
    /// too), calls `raise` with the ones that were live and writes the events it returns,
    /// atomically; those events.
    async fn revoke_user_sessions(
        &self,
        user_id: Uuid,
        keep: Option<Uuid>,
        reason: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
    ) -> Result<Vec<Event>, StoreError>;

    /// The user's sessions, newest first; only live ones (neither revoked nor expired) when
    /// `active_only`.
    async fn sessions_for_user(
        &self,
        user_id: Uuid,
        active_only: bool,
        now: DateTime<Utc>,
    ) -> Result<Vec<SessionRecord>, StoreError>;

    /// One session of the user; `None` when unknown or another user's.
    async fn session_for_user(
        &self,
        user_id: Uuid,
        session_id: Uuid,
    ) -> Result<Option<SessionRecord>, StoreError>;
}

/// The security configuration: the global minimum refresh-token version and the grace period
/// of the last global rotation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(sql, derive(sqlx::FromRow))]
pub struct SecurityConfigRecord {
    /// Refresh tokens stamped below this version are rejected (outside the grace period).
    pub global_min_token_version: i64,
    /// Seconds after the last global rotation during which tokens one step behind still pass.
    pub grace_period_seconds: i64,
    /// When the last global rotation happened; `None` if never.
    pub last_rotation_at: Option<DateTime<Utc>>,
    /// Why; `None` if never.
    pub last_rotation_reason: Option<String>,
    /// Last change of the row.
    pub updated_at: DateTime<Utc>,
}

pub use crate::events::RotationScope;

/// A token rotation to apply and record.
#[derive(Debug, Clone)]
pub struct NewTokenRotation {
    /// Audit id (UUIDv7).
    pub id: Uuid,
    /// Why the rotation was made (1..500 characters).
    pub reason: String,
    /// The administrator who asked for it; `None` for the host itself.
    pub initiated_by: Option<Uuid>,
    /// Grace period to store with a global rotation, and the default grace of a security
    /// configuration row created by a user rotation.
    pub grace_period_seconds: i64,
    /// When.
    pub at: DateTime<Utc>,
}

/// The versions before and after a rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotationOutcome {
    /// The minimum version before.
    pub previous_version: i64,
    /// The minimum version after.
    pub new_version: i64,
}

/// One audit row of a token rotation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(sql, derive(sqlx::FromRow))]
pub struct TokenRotationRecord {
    /// Audit id.
    pub id: Uuid,
    /// Global or one user.
    pub scope: RotationScope,
    /// The user of a user rotation, or the user whose own minimum a global rotation raised
    /// (see [`SecurityStore::rotate_global_token_version`]).
    pub user_id: Option<Uuid>,
    /// Minimum version before.
    pub previous_version: i64,
    /// Minimum version after.
    pub new_version: i64,
    /// Why.
    pub reason: String,
    /// The initiating administrator.
    pub initiated_by: Option<Uuid>,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// The security configuration and refresh-token version rotations.
#[async_trait]
pub trait SecurityStore: Send + Sync {
    /// The security configuration; `None` when no row exists yet (read as version 0, never
    /// rotated). Never writes.
    async fn security_config(&self) -> Result<Option<SecurityConfigRecord>, StoreError>;

    /// The security configuration, created with version 0 and `default_grace_seconds` when no
    /// row exists. Concurrent callers create one row; an existing row is left unchanged.
    async fn ensure_security_config(
        &self,
        default_grace_seconds: i64,
        at: DateTime<Utc>,
    ) -> Result<SecurityConfigRecord, StoreError>;

    /// Raises the global minimum version by one, stores the rotation's time, reason and
    /// `grace_period_seconds`, and writes the audit row, atomically. Users whose own minimum is
    /// at or above the new global minimum (they were rotated individually) have their minimum
    /// raised by one too, so their outstanding tokens are invalidated as well; each such raise
    /// gets its own audit row (scope global, the user, their minimum before and after), which
    /// [`global_rotation_raised_from`](Self::global_rotation_raised_from) reads for the grace
    /// period. Concurrent rotations are serialized: each one is one step. Calls `raise` with
    /// the outcome in the same transaction and writes the events it returns, appended to
    /// `raised` once committed.
    async fn rotate_global_token_version(
        &self,
        rotation: &NewTokenRotation,
        raise: &RaiseEvents<'_, RotationOutcome>,
        raised: &mut Vec<Event>,
    ) -> Result<RotationOutcome, StoreError>;

    /// Raises the user's minimum version above every version their outstanding tokens can carry
    /// (to max(user minimum, global minimum) + 1) and writes the audit row, atomically.
    /// `None` (and nothing written) when the user does not exist. Serialized with every other
    /// rotation. Calls `raise` with the outcome in the same transaction and writes the events
    /// it returns, appended to `raised` once committed.
    async fn rotate_user_token_version(
        &self,
        user_id: Uuid,
        rotation: &NewTokenRotation,
        raise: &RaiseEvents<'_, RotationOutcome>,
        raised: &mut Vec<Event>,
    ) -> Result<Option<RotationOutcome>, StoreError>;

    /// The latest `limit` rotation audit rows, newest first.
    async fn token_rotations(&self, limit: u32) -> Result<Vec<TokenRotationRecord>, StoreError>;

    /// When the user's current minimum `min_token_version` was set by a global rotation (which
    /// raised it because the user had been rotated individually before), the minimum it was
    /// raised from: tokens carrying it still pass during that rotation's grace period. `None`
    /// when a user rotation set the minimum, or it never moved.
    ///
    /// The default answers `None`: such users get no grace, their tokens stop at once.
    async fn global_rotation_raised_from(
        &self,
        user_id: Uuid,
        min_token_version: i64,
    ) -> Result<Option<i64>, StoreError> {
        let _ = (user_id, min_token_version);
        Ok(None)
    }
}

/// The run record and lease of one background job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(sql, derive(sqlx::FromRow))]
pub struct JobRunRecord {
    /// Job name.
    pub name: String,
    /// The runner holding the lease, while one does.
    pub lease_owner: Option<String>,
    /// When the lease lapses unless renewed.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// Start of the latest run.
    pub last_started_at: Option<DateTime<Utc>>,
    /// End of the latest finished run.
    pub last_finished_at: Option<DateTime<Utc>>,
    /// End of the latest successful run.
    pub last_success_at: Option<DateTime<Utc>>,
    /// Error of the latest finished run; `None` when it succeeded.
    pub last_error: Option<String>,
    /// Finished runs.
    pub runs: i64,
    /// Finished runs that failed.
    pub failures: i64,
}

/// How many rows a purge deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeCounts {
    /// Expired verification and reset tokens.
    pub one_time_tokens: u64,
    /// Refresh tokens past their expiry (besides those of deleted sessions).
    pub refresh_tokens: u64,
    /// Sessions revoked or expired before the retention cut-off (with their refresh tokens).
    pub sessions: u64,
    /// Expired OAuth state values.
    pub oauth_states: u64,
}

/// The store side of background jobs: leases, run records, and the housekeeping they do.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Takes the lease of job `name` for `owner` until `lease_until`, and records `now` as the
    /// run's start, in one conditional write. Succeeds only when no live lease exists (none, or
    /// its `lease_expires_at` <= `now`) and the job last started at or before `due_before` (or
    /// never). `false` when either condition fails. Atomic across processes sharing the
    /// database: of concurrent callers at most one gets `true`.
    async fn try_acquire_job_lease(
        &self,
        name: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        due_before: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Extends a lease `owner` still holds; `false` when it holds it no more.
    async fn renew_job_lease(
        &self,
        name: &str,
        owner: &str,
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Records the end of a run (`error` `None` for success: counts, times, last error) and
    /// releases the lease, in one write. `false` (and nothing written) when `owner` no longer
    /// holds the lease.
    async fn finish_job_run(
        &self,
        name: &str,
        owner: &str,
        at: DateTime<Utc>,
        error: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Every job's run record, by name.
    async fn job_runs(&self) -> Result<Vec<JobRunRecord>, StoreError>;

    /// Deletes expired single-use tokens and refresh tokens (`expires_at <= now`), sessions
    /// revoked or expired at or before `retain_after` with their refresh tokens, and expired
    /// OAuth states (`expires_at <= now`). Each kind is deleted atomically.
    async fn purge_expired(
        &self,
        now: DateTime<Utc>,
        retain_after: DateTime<Utc>,
    ) -> Result<PurgeCounts, StoreError>;
}

/// Everything the service needs from storage.
///
/// A store knows no event rules. Each write that raises durable events takes them from the
/// use case, as a list or, where they depend on what the write found, as a
/// [`RaiseEvents`] rule called inside the write's transaction; the store writes exactly
/// those events to its outbox in that transaction (and queues their webhook deliveries), and
/// hands them back for the use case to publish after the commit. A custom store passes the
/// conformance suite's event cases by persisting those rows, nothing more.
pub trait Store:
    UserStore
    + OneTimeTokenStore
    + SessionStore
    + SecurityStore
    + JobStore
    + ConnectionStore
    + AccountStore
    + TransactionStore
    + HoldingStore
    + SnapshotStore
    + ImportStore
    + ProviderConnectionStore
    + SyncStore
    + WebhookStore
    + EventStore
    + LoginNetworkStore
    + 'static
{
}

impl<T> Store for T where
    T: UserStore
        + OneTimeTokenStore
        + SessionStore
        + SecurityStore
        + JobStore
        + ConnectionStore
        + AccountStore
        + TransactionStore
        + HoldingStore
        + SnapshotStore
        + ImportStore
        + ProviderConnectionStore
        + SyncStore
        + WebhookStore
        + EventStore
        + LoginNetworkStore
        + 'static
{
}

/// Current time truncated to microseconds, the precision both databases keep.
pub fn now() -> DateTime<Utc> {
    truncate_to_micros(Utc::now())
}

/// Truncates a timestamp to microseconds.
pub fn truncate_to_micros(at: DateTime<Utc>) -> DateTime<Utc> {
    crate::dates::truncate_to_micros(at)
}
