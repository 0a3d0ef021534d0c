//! The security configuration and refresh-token version rotations.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreError;
use crate::events::{Event, RaiseEvents};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// The security configuration: the global minimum refresh-token version and the grace period
/// of the last global rotation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
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
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
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
