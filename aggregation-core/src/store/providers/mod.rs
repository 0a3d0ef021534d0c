//! Provider connections beyond the records: OAuth state values, encrypted credentials, the
//! connection lifecycle, sync cool-downs, change-feed cursors and webhook keys. What a sync
//! fetched is written by the one batch writer, [`BatchStore`](super::BatchStore).
//!
//! Credentials reach the store already encrypted (see [`crate::crypto::Keyring`]) and OAuth
//! states only as their SHA-256 digest, so neither a database dump nor a log line carries a
//! usable secret.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreError;
use super::records::{ConnectionRecord, ConnectionStatus};
use crate::enums::string_enum;
use crate::events::{Event, RaiseEvents};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// A pending OAuth authorization, stored when a user starts connecting a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct NewOAuthState {
    /// SHA-256 of the state value handed to the provider (the value itself is never stored).
    pub state_digest: Vec<u8>,
    /// The user who started the flow.
    pub user_id: Uuid,
    /// The provider being connected.
    pub provider_slug: String,
    /// The alias the connection will get (`None` when none was given).
    pub alias: Option<String>,
    /// The redirect URI sent to the provider; the code exchange must send it again.
    pub redirect_uri: String,
    /// The PKCE verifier, encrypted (nonce and ciphertext), when the provider uses PKCE.
    pub encrypted_pkce_verifier: Option<Vec<u8>>,
    /// The key that encrypted the verifier.
    pub pkce_key_id: Option<String>,
    /// The connection a reauthorization renews (its callback renews exactly that one);
    /// `None` for a fresh connect.
    pub reauthorizes_connection_id: Option<Uuid>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// After this instant the state is refused and may be purged.
    pub expires_at: DateTime<Utc>,
}

/// A stored OAuth state, as [`ProviderConnectionStore::take_oauth_state`] returns it.
pub type OAuthStateRecord = NewOAuthState;

/// Credentials to store on a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptedCredentials {
    /// Nonce and ciphertext of the serialized provider credentials.
    pub ciphertext: Vec<u8>,
    /// The id of the key that encrypted them.
    pub key_id: String,
    /// When the credentials must be renewed, `None` when never (kept in clear so the
    /// renewal job can find connections that are due without decrypting anything).
    pub renew_at: Option<DateTime<Utc>>,
}

string_enum! {
    /// The kind of sync a cool-down applies to.
    SyncKind {
        /// Accounts sync of a connection.
        Accounts => "accounts",
        /// Transactions sync of a connection.
        Transactions => "transactions",
        /// Holdings sync of one account.
        Holdings => "holdings",
        /// Whole-connection sync (accounts, transactions, holdings).
        Connection => "connection",
    }
}

/// The answer to [`ProviderConnectionStore::claim_sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncClaim {
    /// The sync may run; `previous` is the start of the last claimed sync (to hand back to
    /// [`ProviderConnectionStore::release_sync`] if this one fails).
    Granted {
        /// Start of the previous sync of this subject and kind, if any.
        previous: Option<DateTime<Utc>>,
    },
    /// A sync of this subject and kind started less than the cool-down ago.
    CoolingDown {
        /// When the subject may be synced again.
        until: DateTime<Utc>,
    },
}

/// Provider connections: OAuth states, lifecycle and credentials.
#[async_trait]
pub trait ProviderConnectionStore: Send + Sync {
    /// Stores a pending OAuth state.
    async fn insert_oauth_state(&self, state: &NewOAuthState) -> Result<(), StoreError>;

    /// Deletes the state with this digest and returns it, expired or not (the caller checks
    /// `expires_at`). Atomic: of concurrent calls with one digest exactly one gets `Some`.
    async fn take_oauth_state(
        &self,
        state_digest: &[u8],
    ) -> Result<Option<OAuthStateRecord>, StoreError>;

    /// The user's connections, newest first; only `active` ones when `active_only`.
    async fn connections_for_user(
        &self,
        user_id: Uuid,
        active_only: bool,
    ) -> Result<Vec<ConnectionRecord>, StoreError>;

    /// The connection with this id, whoever owns it (for background jobs).
    async fn connection_by_id(
        &self,
        connection_id: Uuid,
    ) -> Result<Option<ConnectionRecord>, StoreError>;

    /// Stores a connection made by an OAuth callback, in one transaction: when the user has a
    /// connection with this provider slug and alias (compared exactly, `None` matches `None`)
    /// that is not disconnected, it gets the new credentials, status `active` and a new
    /// `connected_at` (a re-authorization keeps its accounts); otherwise a connection with id
    /// `new_id` is created, `active`. The connection is returned with `true` when it was
    /// created. [`StoreError::Other`] when the user does not exist.
    ///
    /// Because the credentials' associated data is the connection id, the caller encrypts
    /// them for the id it will get: `credentials_for` is called with that id before anything
    /// is written.
    ///
    /// Calls `raise` with what it returns, in the same transaction, writes the events it
    /// returns and, once committed, appends them to `raised` (for the caller to publish).
    #[expect(
        clippy::too_many_arguments,
        reason = "one atomic write, each input needed"
    )]
    async fn save_authorized_connection(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<&str>,
        new_id: Uuid,
        credentials_for: &(dyn Fn(Uuid) -> Result<EncryptedCredentials, StoreError> + Send + Sync),
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, (ConnectionRecord, bool)>,
        raised: &mut Vec<Event>,
    ) -> Result<(ConnectionRecord, bool), StoreError>;

    /// Renews the credentials of one of the user's connections that is not disconnected, in
    /// one transaction, as [`save_authorized_connection`](Self::save_authorized_connection)
    /// does an existing one (status `active`, a new `connected_at`, its accounts kept), but
    /// found by id: a reauthorization's callback renews exactly the connection it was started
    /// for. `None`, with nothing written, when the connection is unknown, foreign or
    /// disconnected.
    ///
    /// `credentials_for` is called with the connection's id; `raise` with the renewed
    /// connection (and `false`: not created), in the same transaction, and the events it
    /// returns are written and, once committed, appended to `raised`.
    async fn renew_authorized_connection(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        credentials_for: &(dyn Fn(Uuid) -> Result<EncryptedCredentials, StoreError> + Send + Sync),
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, (ConnectionRecord, bool)>,
        raised: &mut Vec<Event>,
    ) -> Result<Option<ConnectionRecord>, StoreError>;

    /// Sets the alias of one of the user's connections; `None` when unknown or foreign.
    /// `updated_at` moves only when the alias changes.
    async fn update_connection_alias(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        alias: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<ConnectionRecord>, StoreError>;

    /// Marks one of the user's connections `disconnected` and clears its credentials (the
    /// record and its accounts are kept), with the events `raise` returns for the
    /// disconnected record (called in the transaction), atomically; an already disconnected
    /// connection is returned as it is (no events). `None` when unknown or foreign. The
    /// events written are appended to `raised` once committed.
    async fn disconnect_connection(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, ConnectionRecord>,
        raised: &mut Vec<Event>,
    ) -> Result<Option<ConnectionRecord>, StoreError>;

    /// Replaces the credentials of a connection after a token refresh, as a compare-and-swap:
    /// only while the stored ciphertext is still `previous` (the credentials the refresh
    /// started from) and the connection is not disconnected. `false`, with nothing written,
    /// when another writer (a refresh on another instance, a re-authorization, a disconnect)
    /// changed them meanwhile; the caller then reads the connection again. A connection that is
    /// `expired` (with these same credentials: a refusal on another instance that raced this
    /// refresh) becomes `active` again. Atomic: of concurrent swaps from one `previous` at
    /// most one succeeds.
    async fn replace_connection_credentials(
        &self,
        connection_id: Uuid,
        previous: &[u8],
        credentials: &EncryptedCredentials,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Marks an `active` connection `expired` after its provider refused the refresh, but only
    /// while its stored ciphertext is still `previous` (the credentials whose refresh token
    /// was refused): a refusal caused by another instance having rotated the token first must
    /// not expire the connection. `false`, with nothing written, otherwise. The expiry writes
    /// `events` in the same transaction, appended to `raised` once committed.
    async fn expire_connection_credentials(
        &self,
        connection_id: Uuid,
        previous: &[u8],
        now: DateTime<Utc>,
        events: &[Event],
        raised: &mut Vec<Event>,
    ) -> Result<bool, StoreError>;

    /// Marks a connection `revoked` (the provider says the user withdrew the access), with
    /// `events` written in the same transaction and appended to `raised` once committed.
    /// `false`, with nothing written, when the connection is unknown, disconnected (a
    /// disconnect is final) or already revoked (a repeated webhook raises nothing twice).
    async fn revoke_connection(
        &self,
        connection_id: Uuid,
        now: DateTime<Utc>,
        events: &[Event],
        raised: &mut Vec<Event>,
    ) -> Result<bool, StoreError>;

    /// Sets the status of a connection that is not disconnected (`false` when it is, or is
    /// unknown). A low-level write for embedders and tests: it raises no event (the use cases
    /// go through the writes above, which do).
    async fn set_connection_status(
        &self,
        connection_id: Uuid,
        status: ConnectionStatus,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Active connections with credentials whose access token expires at or before `before`,
    /// soonest first, at most `limit`.
    async fn connections_due_for_token_refresh(
        &self,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<ConnectionRecord>, StoreError>;

    /// Active connections with credentials whose last sync is older than `synced_before` (or
    /// that never synced), least recently synced first, at most `limit`.
    async fn connections_due_for_sync(
        &self,
        synced_before: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<ConnectionRecord>, StoreError>;

    /// Claims a sync of `subject_id` (a connection, or an account for holdings) of `kind` at
    /// `now`: granted when `force`, when there was none, or when the last one started at or
    /// before `now - cooldown`; the claim then records `now`. Atomic: of concurrent claims
    /// inside one cool-down exactly one is granted.
    async fn claim_sync(
        &self,
        subject_id: Uuid,
        kind: SyncKind,
        now: DateTime<Utc>,
        cooldown: chrono::TimeDelta,
        force: bool,
    ) -> Result<SyncClaim, StoreError>;

    /// Undoes a granted claim whose sync failed: the recorded start goes back to `previous`
    /// (or the record is removed when `None`), but only if it is still `claimed_at`.
    async fn release_sync(
        &self,
        subject_id: Uuid,
        kind: SyncKind,
        claimed_at: DateTime<Utc>,
        previous: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError>;

    /// The instant up to which the connection's provider requests are paid for (its request
    /// budget as a token bucket: see [`spend_request_budget`](Self::spend_request_budget)).
    /// `None` when it never spent any (a full bucket).
    async fn request_budget_paid_until(
        &self,
        connection_id: Uuid,
    ) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// Spends `cost` (requests sent × the budget's refill interval) of the connection's
    /// request budget at `now`: the paid-until instant becomes the later of it and `now`,
    /// plus `cost`. One atomic statement, so concurrent spends of several instances add up.
    async fn spend_request_budget(
        &self,
        connection_id: Uuid,
        now: DateTime<Utc>,
        cost: chrono::TimeDelta,
    ) -> Result<(), StoreError>;
}

/// What provider syncs keep beyond their rows (those go through
/// [`BatchStore::apply_batch`](super::BatchStore::apply_batch)).
#[async_trait]
pub trait SyncStore: Send + Sync {
    /// The change-feed cursor stored for the connection ([`BatchConnection::feed`](super::BatchConnection::feed)); `None` when
    /// none was stored (the feed starts from its beginning).
    async fn sync_cursor(&self, connection_id: Uuid) -> Result<Option<String>, StoreError>;

    /// Records what the provider's webhooks name the connection by (the SHA-256 digest of,
    /// say, Plaid's `item_id`), replacing what was recorded for it.
    async fn set_webhook_key(
        &self,
        connection_id: Uuid,
        provider_slug: &str,
        key_digest: &[u8],
    ) -> Result<(), StoreError>;

    /// The connection of this provider that is not disconnected whose webhook key has this
    /// digest (the most recently updated one); `None` when there is none.
    async fn connection_by_webhook_key(
        &self,
        provider_slug: &str,
        key_digest: &[u8],
    ) -> Result<Option<ConnectionRecord>, StoreError>;

    /// Writes events about a connection that change nothing else (`connection.expiring`),
    /// appended to `raised` once committed.
    async fn record_events(
        &self,
        events: &[Event],
        raised: &mut Vec<Event>,
    ) -> Result<(), StoreError>;
}
