//! Users, their roles, and single-use email tokens (verification and password reset).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreError;
use super::sessions::RevokedSessions;
use crate::enums::string_enum;
use crate::events::{Event, RaiseEvents};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

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
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
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
    /// the events it returns, appended to `raised` once committed (none unless `Consumed`).
    async fn reset_password(
        &self,
        digest: &[u8],
        password_hash: &str,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, RevokedSessions>,
        raised: &mut Vec<Event>,
    ) -> Result<TokenCheck, StoreError>;
}
