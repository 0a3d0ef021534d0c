//! Sessions and their refresh tokens.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreError;
use crate::events::{Event, RaiseEvents};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// A stored session.
#[derive(Debug, Clone)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
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
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
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
    /// atomically; the events written are appended to `raised` once committed (none when it
    /// was revoked already). `false`: no such session for this user.
    async fn revoke_session(
        &self,
        user_id: Uuid,
        session_id: Uuid,
        reason: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
        raised: &mut Vec<Event>,
    ) -> Result<bool, StoreError>;

    /// Revokes the session of the refresh token with this digest, if the token belongs to the
    /// user, and writes the events `raise` returns for it, like
    /// [`revoke_session`](Self::revoke_session), appending them to `raised` once committed.
    /// `false` when the token is unknown or another user's.
    async fn revoke_session_by_token(
        &self,
        user_id: Uuid,
        digest: &[u8],
        reason: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
        raised: &mut Vec<Event>,
    ) -> Result<bool, StoreError>;

    /// Revokes every session of the user except `keep`, with their tokens (expired ones
    /// too), calls `raise` with the ones that were live and writes the events it returns,
    /// atomically; those events are appended to `raised` once committed. How many live
    /// sessions were revoked.
    async fn revoke_user_sessions(
        &self,
        user_id: Uuid,
        keep: Option<Uuid>,
        reason: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
        raised: &mut Vec<Event>,
    ) -> Result<u64, StoreError>;

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
