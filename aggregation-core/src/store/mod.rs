//! Storage: one trait per aggregate, and the SQLite and PostgreSQL backends over sqlx.
//!
//! The service holds one [`Store`], the sum of every aggregate trait. Both backends implement all
//! of them with the same SQL, so behaviour cannot drift between them.
//!
//! Each aggregate is one module holding its trait(s), its records and, in a `sql` submodule
//! compiled with `sqlite` or `postgres`, their implementation: `users` (users, roles, single-use
//! tokens), `sessions`, `security` (token rotations), `jobs`, `records` (connections, accounts,
//! transactions, holdings, snapshots), `batches` (the one writer of every source's rows),
//! `providers` (provider connections, cursors and webhook keys),
//! `webhooks`, `events` (the outbox and audit list), `login_networks`, `user_data` (erasure
//! and export of a user's own data) and `search` (search and spending across accounts). Everything public is
//! re-exported here.
//!
//! The SQL is compiled once, generic over the database: [`SqlStore<B>`](SqlStore) for a
//! [`Backend`] `B`, with `SqliteStore` and `PostgresStore` its two instances. Rather than
//! restate sqlx's trait bounds (bindable, decodable, executor) on every generic function, the
//! sealed `Backend` does the few backend-bound steps concretely for each database (begin a write
//! transaction, bind, execute, fetch rows as records or scalars), with binds, records and
//! scalars bounded by the store's own traits whose supertraits are sqlx's bounds for each
//! compiled backend; the aggregate SQL calls it through thin `query`/`query_as`/`query_scalar`/
//! `QueryBuilder` look-alikes of sqlx's (`store/backend.rs`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), aggregation_core::store::StoreError> {
//! use aggregation_core::store::SqliteStore;
//! let store = SqliteStore::in_memory().await?;
//! store.migrate().await?;
//! # Ok(()) }
//! ```

use chrono::{DateTime, Utc};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod backend;
mod batches;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod event_tests;
mod events;
mod guard;
#[cfg(test)]
#[cfg(feature = "sqlite")]
mod import_tests;
mod jobs;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod login_network_tests;
mod login_networks;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod migrate;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod migrate_tests;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod provider_tests;
mod providers;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod reconcile_tests;
mod records;
mod search;
mod security;
mod sessions;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod user_data;
mod users;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod webhook_tests;
mod webhooks;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use backend::{Backend, SqlStore};
pub use batches::{
    AbsentHoldings, AccountCounts, BatchAccount, BatchConnection, BatchCounts, BatchSnapshot,
    BatchStore, BatchTarget, FILE_IMPORT_PROVIDER, FeedUpdate, ImportOutcome, NormalizedBatch,
    ProviderEnrichment, StatedBalances,
};
pub use events::{AuditFilter, EventStore};
pub(crate) use guard::GuardedStore;
#[cfg(feature = "testing")]
pub(crate) use guard::for_each_store_trait;
pub use jobs::{JobRunRecord, JobStore, PurgeCounts};
pub use login_networks::LoginNetworkStore;
#[cfg(feature = "postgres")]
pub use postgres::{InvalidSchemaName, PostgresStore, PostgresStoreBuilder, SchemaName};
pub use providers::{
    EncryptedCredentials, NewOAuthState, OAuthStateRecord, ProviderConnectionStore, SyncClaim,
    SyncKind, SyncStore,
};
pub use records::{
    AccountFilter, AccountRecord, AccountStore, AccountType, AssetType, CategorySource,
    ConnectionRecord, ConnectionStatus, ConnectionStore, CustomCategoryRecord, HoldingFilter,
    HoldingPage, HoldingRecord, HoldingStore, MatchDecision, MatchFilter, MatchKind, MatchRecord,
    MatchStatus, NewAccount, NewConnection, NewHolding, NewSnapshot, NewTransaction, Page,
    PageAfter, PointBalance, RuleRecord, SnapshotRecord, SnapshotSource, SnapshotStore,
    TransactionEdit, TransactionEdited, TransactionPosition, TransactionQuery, TransactionRecord,
    TransactionSource, TransactionStatus, TransactionStore, TransactionType, UpsertCounts,
    mask_account_number, provider_id,
};
pub use search::{SearchStore, SpendingRow, TransactionSearch};
pub use security::{
    NewTokenRotation, RotationOutcome, RotationScope, SecurityConfigRecord, SecurityStore,
    TokenRotationRecord,
};
pub use sessions::{
    NewRefreshToken, NewSession, RefreshTokenRecord, RevokedSessions, SessionRecord, SessionStore,
};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use user_data::{
    Exported, KEPT_USER_TABLES, NewUserErasure, USER_TABLES, UserDataStore, UserErasureRecord,
    UserTable,
};
pub use users::{
    NewOneTimeToken, NewUser, OneTimeTokenStore, Role, TokenCheck, TokenPurpose, UserRecord,
    UserStore,
};
pub use webhooks::{
    ClaimedDelivery, DeliveryClaim, DeliveryStatus, DisabledWebhook, NewWebhookEndpoint,
    NextDelivery, WebhookAttempt, WebhookAttemptRecord, WebhookDeliveryRecord,
    WebhookEndpointRecord, WebhookStore,
};

/// A coarse storage failure; backends log their detail and convert it into one of these.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not be reached or talked to (answered as 503 with `Retry-After`).
    /// Calls failing with it in a row, and then a failing ping, open the service's circuit
    /// breaker, so return it only when the store itself is at fault, never for a bad row or
    /// a slow call.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// The database answers but did not finish this call in time: a statement timeout
    /// (PostgreSQL `57014`), a lock another writer held past the busy timeout (SQLite busy or
    /// locked, PostgreSQL `55P03`), a transaction given up for a concurrent one. Answered as
    /// 503 with `Retry-After` for this call alone: it never counts toward opening the circuit
    /// breaker, since one user's slow work must not refuse everybody.
    #[error("the store is busy: {0}")]
    Busy(String),
    /// A uniqueness rule was broken (for example, an email already registered).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The write would leave the user with more accounts than its batch allows
    /// ([`NormalizedBatch::account_limit`]); nothing was written
    /// (answered as 422).
    #[error("the user would hold more than {limit} accounts")]
    AccountLimit {
        /// The most accounts the user may hold.
        limit: u64,
    },
    /// Anything else (answered as 500, never shown to clients).
    #[error("store failure: {0}")]
    Other(String),
}

/// Everything the service needs from storage.
///
/// A store knows no event rules. Each write that raises durable events takes them from the
/// use case, as a list or, where they depend on what the write found, as a
/// [`RaiseEvents`](crate::events::RaiseEvents) rule called inside the write's transaction;
/// the store writes exactly those events to its outbox in that transaction (and queues their
/// webhook deliveries), and hands them back for the use case to publish after the commit. A custom store passes the
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
    + BatchStore
    + ProviderConnectionStore
    + SyncStore
    + WebhookStore
    + EventStore
    + LoginNetworkStore
    + UserDataStore
    + SearchStore
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
        + BatchStore
        + ProviderConnectionStore
        + SyncStore
        + WebhookStore
        + EventStore
        + LoginNetworkStore
        + UserDataStore
        + SearchStore
        + 'static
{
}

/// Current time truncated to microseconds, the precision both databases keep. Public with the
/// `testing` feature only, for fixtures that write times the store must read back unchanged.
#[cfg(feature = "testing")]
pub fn now() -> DateTime<Utc> {
    crate::dates::truncate_to_micros(Utc::now())
}

/// Current time truncated to microseconds, the precision both databases keep.
#[cfg(not(feature = "testing"))]
pub(crate) fn now() -> DateTime<Utc> {
    crate::dates::truncate_to_micros(Utc::now())
}
