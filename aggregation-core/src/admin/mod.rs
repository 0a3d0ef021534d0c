//! Administration: the admin role, refresh-token version rotations (global and per user) and
//! the security configuration.
//!
//! The admin role lives in the store and is checked there on every admin request, so granting
//! or withdrawing it takes effect at once, whatever roles an outstanding access token lists.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use aggregation_core::admin::grant_admin_by_email;
//! use aggregation_core::store::SqliteStore;
//! let store = SqliteStore::connect("sqlite://aggregation.db?mode=rwc").await?;
//! store.migrate().await?;
//! let granted_now = grant_admin_by_email(&store, "ops@example.com").await?;
//! # let _ = granted_now;
//! # Ok(()) }
//! ```
//!
//! The grace period of a global rotation is [`Config::rotation_grace`] at the time of the
//! rotation; it is stored with the rotation (and shown by the security configuration), so
//! changing the setting affects the next rotation, not one already under way.
//!
//! Token versions: a refresh token is stamped with max(global minimum, user minimum) when it is
//! issued and rejected once its version is below that maximum, except within the grace period
//! after a global rotation, where a token exactly one global step behind (and not below the
//! user's minimum) still passes. A user rotation raises the user's minimum to
//! max(user minimum, global minimum) + 1, so it always invalidates every token the user holds,
//! while tokens issued after it carry the new minimum and keep working.
//!
//! Individually rotated users hold tokens stamped with their own minimum, at or above the
//! global one, which a global rotation alone would not reach. So a global rotation also raises
//! by one the minimum of every user whose minimum is at or above the new global minimum, and
//! writes one audit row per such user (scope `global`, the user, their minimum before and
//! after). Those users get the same grace as everyone: within the grace period a token
//! carrying the minimum they had just before the rotation (one step behind their raised
//! minimum) still passes, and its successor carries the new one. The audit row is what tells
//! this raise from a user rotation, so a user rotation during the grace period ends the grace
//! for that user at once.

use std::time::Duration;

use uuid::Uuid;

use crate::config::Config;
use crate::store::{NewTokenRotation, Role, SecurityConfigRecord, Store, StoreError, now};

/// Why an administrative operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// No account has this email.
    #[error("no account is registered with the email {0:?}")]
    UnknownEmail(String),
    /// The target user of a rotation does not exist.
    #[error("User {0} not found.")]
    UnknownUser(Uuid),
    /// The caller does not hold the admin role.
    #[error("This operation requires the admin role.")]
    NotAdmin,
    /// A rotation could not be applied (the text says why, without store internals).
    #[error("Token rotation failed: {0}")]
    RotationFailed(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Grants the `admin` role to the account with this email (trimmed, case-insensitive).
/// `Ok(true)` when granted now, `Ok(false)` when the account already had it,
/// [`AdminError::UnknownEmail`] when no account has the email.
pub async fn grant_admin_by_email(store: &dyn Store, email: &str) -> Result<bool, AdminError> {
    let normalized = crate::auth::normalize_email(email);
    let Some(user) = store.user_by_email(&normalized).await? else {
        return Err(AdminError::UnknownEmail(email.trim().to_owned()));
    };
    Ok(store.grant_role(user.id, Role::Admin, now()).await?)
}

/// Checks in the store that the user holds the admin role.
pub(crate) async fn require_admin(store: &dyn Store, user_id: Uuid) -> Result<(), AdminError> {
    if store.user_roles(user_id).await?.contains(&Role::Admin) {
        Ok(())
    } else {
        Err(AdminError::NotAdmin)
    }
}

/// The result of a global rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalRotation {
    /// Global minimum before.
    pub previous_version: i64,
    /// Global minimum after.
    pub new_version: i64,
    /// Seconds during which tokens one step behind still pass.
    pub grace_period_seconds: i64,
}

/// The result of a user rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRotation {
    /// The user.
    pub user_id: Uuid,
    /// The user's minimum before.
    pub previous_version: i64,
    /// The user's minimum after.
    pub new_version: i64,
}

fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// Turns a store failure during a rotation into the error the API reports: unavailability stays
/// a 503, anything else becomes a rotation failure whose text names no SQL.
fn rotation_failure(error: StoreError) -> AdminError {
    match error {
        StoreError::Unavailable(_) => AdminError::Store(error),
        StoreError::Conflict(_) => AdminError::RotationFailed(
            "a concurrent change conflicted with the rotation; nothing was changed".to_owned(),
        ),
        _ => AdminError::RotationFailed(
            "the store could not record the new token version; nothing was changed".to_owned(),
        ),
    }
}

fn new_rotation(config: &Config, initiated_by: Option<Uuid>, reason: &str) -> NewTokenRotation {
    NewTokenRotation {
        id: Uuid::now_v7(),
        reason: reason.to_owned(),
        initiated_by,
        grace_period_seconds: seconds(config.rotation_grace()),
        at: now(),
    }
}

/// Raises the global minimum token version by one step, with the configured grace period.
pub(crate) async fn rotate_global(
    store: &dyn Store,
    config: &Config,
    initiated_by: Option<Uuid>,
    reason: &str,
) -> Result<GlobalRotation, AdminError> {
    let rotation = new_rotation(config, initiated_by, reason);
    let outcome = store
        .rotate_global_token_version(&rotation)
        .await
        .map_err(rotation_failure)?;
    tracing::warn!(
        previous_version = outcome.previous_version,
        new_version = outcome.new_version,
        initiated_by = ?initiated_by,
        reason,
        "global refresh-token rotation"
    );
    Ok(GlobalRotation {
        previous_version: outcome.previous_version,
        new_version: outcome.new_version,
        grace_period_seconds: rotation.grace_period_seconds,
    })
}

/// Raises one user's minimum token version, invalidating every refresh token they hold.
pub(crate) async fn rotate_user(
    store: &dyn Store,
    config: &Config,
    initiated_by: Option<Uuid>,
    user_id: Uuid,
    reason: &str,
) -> Result<UserRotation, AdminError> {
    let rotation = new_rotation(config, initiated_by, reason);
    let outcome = store
        .rotate_user_token_version(user_id, &rotation)
        .await
        .map_err(rotation_failure)?
        .ok_or(AdminError::UnknownUser(user_id))?;
    tracing::warn!(
        %user_id,
        previous_version = outcome.previous_version,
        new_version = outcome.new_version,
        initiated_by = ?initiated_by,
        reason,
        "user refresh-token rotation"
    );
    Ok(UserRotation {
        user_id,
        previous_version: outcome.previous_version,
        new_version: outcome.new_version,
    })
}

/// The security configuration, created with defaults (version 0, the configured grace) when
/// none exists.
pub(crate) async fn security_config(
    store: &dyn Store,
    config: &Config,
) -> Result<SecurityConfigRecord, AdminError> {
    Ok(store
        .ensure_security_config(seconds(config.rotation_grace()), now())
        .await?)
}
