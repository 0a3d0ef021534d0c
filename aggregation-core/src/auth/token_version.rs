//! The refresh-token version rule, in one place: which version a new refresh token is stamped
//! with, whether a presented token's version is still current, and the rotations that raise
//! the minimums.
//!
//! A refresh token is stamped with max(global minimum, user minimum) when it is issued and
//! rejected once its version is below that maximum, except within the grace period after a
//! global rotation, where a token exactly one global step behind (and not below the user's
//! minimum) still passes. A user rotation raises the user's minimum to
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
//!
//! The raises themselves are applied atomically by the store (`rotate_global_token_version`,
//! `rotate_user_token_version`); this module decides what is asked of it and how its answers
//! read.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use uuid::Uuid;

use crate::config::Config;
use crate::dates;
use crate::events::{DurableEvent, Event, RotationScope, SecurityRotation};
use crate::store::{
    NewTokenRotation, RotationOutcome, SecurityConfigRecord, Store, StoreError, UserRecord, now,
};

/// The result of a global rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GlobalRotation {
    /// Global minimum before.
    pub previous_version: i64,
    /// Global minimum after.
    pub new_version: i64,
    /// Seconds during which tokens one step behind still pass.
    pub grace_period_seconds: i64,
}

/// The result of a user rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UserRotation {
    /// The user.
    pub user_id: Uuid,
    /// The user's minimum before.
    pub previous_version: i64,
    /// The user's minimum after.
    pub new_version: i64,
}

/// Why a rotation was not applied.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RotationError {
    /// The target user of a user rotation does not exist.
    #[error("User {0} not found.")]
    UnknownUser(Uuid),
    /// The store refused the change (the text says why, without store internals).
    #[error("Token rotation failed: {0}")]
    Failed(&'static str),
    /// The store is unavailable.
    #[error(transparent)]
    Store(StoreError),
}

/// The version a refresh token issued now is stamped with: max(global minimum, user minimum).
/// No security configuration yet reads as global minimum 0.
pub(crate) fn floor(security: Option<&SecurityConfigRecord>, user: &UserRecord) -> i64 {
    security
        .map_or(0, |config| config.global_min_token_version)
        .max(user.min_token_version)
}

/// Whether a refresh token stamped `version` still passes at `at` on the configuration and
/// the user alone: at or above [`floor`]; or, within the grace period after the last global
/// rotation, exactly one global step behind and not below the user's minimum.
fn accepted(
    security: Option<&SecurityConfigRecord>,
    user: &UserRecord,
    version: i64,
    at: DateTime<Utc>,
) -> bool {
    if version >= floor(security, user) {
        return true;
    }
    let Some(config) = security else {
        return false;
    };
    in_rotation_grace(config, at)
        && version == config.global_min_token_version - 1
        && version >= user.min_token_version
}

/// Whether `at` falls within the grace period of the last global rotation.
fn in_rotation_grace(config: &SecurityConfigRecord, at: DateTime<Utc>) -> bool {
    config.last_rotation_at.is_some_and(|rotated_at| {
        at < dates::later(
            rotated_at,
            TimeDelta::try_seconds(config.grace_period_seconds).unwrap_or(TimeDelta::MAX),
        )
    })
}

/// Whether `version` may be the grace of a global rotation that raised this user (they had
/// been rotated individually before, so their tokens carried their own minimum): one step
/// behind their minimum, within the grace period. Only then is the store asked.
fn may_be_raised_in_grace(
    security: Option<&SecurityConfigRecord>,
    user: &UserRecord,
    version: i64,
    at: DateTime<Utc>,
) -> bool {
    security.is_some_and(|config| {
        in_rotation_grace(config, at)
            && user.min_token_version > config.global_min_token_version
            && version == user.min_token_version - 1
    })
}

/// Whether a refresh token of `user` stamped `version` is current at `at`: [`accepted`] on
/// the configuration and the user, or within the grace of a global rotation that raised the
/// user's own minimum (which the store's audit rows tell).
pub(crate) async fn is_current(
    store: &dyn Store,
    security: Option<&SecurityConfigRecord>,
    user: &UserRecord,
    version: i64,
    at: DateTime<Utc>,
) -> Result<bool, StoreError> {
    if accepted(security, user, version, at) {
        return Ok(true);
    }
    if !may_be_raised_in_grace(security, user, version, at) {
        return Ok(false);
    }
    let raised_from = store
        .global_rotation_raised_from(user.id, user.min_token_version)
        .await?;
    Ok(raised_from == Some(version))
}

/// Seconds of a duration, saturating.
pub(crate) fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// Turns a store failure during a rotation into what the caller reports: unavailability stays
/// a store error, anything else becomes a rotation failure whose text names no SQL.
fn rotation_failure(error: StoreError) -> RotationError {
    match error {
        StoreError::Unavailable(_) | StoreError::Busy(_) => RotationError::Store(error),
        StoreError::Conflict(_) => RotationError::Failed(
            "a concurrent change conflicted with the rotation; nothing was changed",
        ),
        _ => RotationError::Failed(
            "the store could not record the new token version; nothing was changed",
        ),
    }
}

/// The rule of a rotation's events: its `security.rotation` event (the user's, for a user
/// rotation), with the versions the store found.
pub(crate) fn rotation_events(
    rotation: &NewTokenRotation,
    scope: RotationScope,
    target_user_id: Option<Uuid>,
) -> impl Fn(&RotationOutcome) -> Vec<Event> + Send + Sync + '_ {
    move |outcome| {
        vec![
            SecurityRotation {
                rotation_id: rotation.id,
                scope,
                target_user_id,
                previous_version: outcome.previous_version,
                new_version: outcome.new_version,
                initiated_by: rotation.initiated_by,
            }
            .event_at(rotation.at),
        ]
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

/// Raises the global minimum token version by one step, with the configured grace period
/// (stored with the rotation, so changing the setting affects the next rotation only). Its
/// `security.rotation` event is appended to `raised` once committed.
pub(crate) async fn rotate_global(
    store: &dyn Store,
    config: &Config,
    initiated_by: Option<Uuid>,
    reason: &str,
    raised: &mut Vec<Event>,
) -> Result<GlobalRotation, RotationError> {
    let rotation = new_rotation(config, initiated_by, reason);
    let outcome = store
        .rotate_global_token_version(
            &rotation,
            &rotation_events(&rotation, RotationScope::Global, None),
            raised,
        )
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

/// Raises one user's minimum token version, invalidating every refresh token they hold. Its
/// `security.rotation` event is appended to `raised` once committed.
pub(crate) async fn rotate_user(
    store: &dyn Store,
    config: &Config,
    initiated_by: Option<Uuid>,
    user_id: Uuid,
    reason: &str,
    raised: &mut Vec<Event>,
) -> Result<UserRotation, RotationError> {
    let rotation = new_rotation(config, initiated_by, reason);
    let outcome = store
        .rotate_user_token_version(
            user_id,
            &rotation,
            &rotation_events(&rotation, RotationScope::User, Some(user_id)),
            raised,
        )
        .await
        .map_err(rotation_failure)?
        .ok_or(RotationError::UnknownUser(user_id))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn user(min_token_version: i64) -> UserRecord {
        UserRecord {
            id: Uuid::nil(),
            email: "ada@example.com".to_owned(),
            password_hash: String::new(),
            email_verified_at: None,
            min_token_version,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    fn config(global: i64, rotated_secs_ago: Option<i64>, grace: i64) -> SecurityConfigRecord {
        SecurityConfigRecord {
            global_min_token_version: global,
            grace_period_seconds: grace,
            last_rotation_at: rotated_secs_ago.map(|ago| Utc::now() - TimeDelta::seconds(ago)),
            last_rotation_reason: None,
            updated_at: Utc::now(),
        }
    }

    #[test]
    fn versions_are_stamped_with_the_higher_minimum() {
        assert_eq!(floor(None, &user(2)), 2);
        assert_eq!(floor(Some(&config(3, None, 300)), &user(2)), 3);
        assert_eq!(floor(Some(&config(1, None, 300)), &user(2)), 2);
    }

    #[test]
    fn grace_accepts_exactly_one_global_step_behind() {
        let at = Utc::now();
        assert!(accepted(None, &user(0), 0, at));
        assert!(!accepted(None, &user(1), 0, at));
        let fresh = config(2, Some(10), 300);
        assert!(accepted(Some(&fresh), &user(0), 2, at));
        assert!(accepted(Some(&fresh), &user(0), 1, at));
        assert!(!accepted(Some(&fresh), &user(0), 0, at));
        // Not below the user's own minimum, even within grace.
        assert!(!accepted(Some(&fresh), &user(2), 1, at));
        let stale = config(2, Some(301), 300);
        assert!(!accepted(Some(&stale), &user(0), 1, at));
        assert!(accepted(Some(&stale), &user(0), 2, at));
        let never = config(2, None, 300);
        assert!(!accepted(Some(&never), &user(0), 1, at));
    }

    #[test]
    fn only_a_raised_user_one_step_behind_within_grace_asks_the_store() {
        let at = Utc::now();
        let fresh = config(2, Some(10), 300);
        // Raised above the global minimum by a global rotation: one step behind may pass.
        assert!(may_be_raised_in_grace(Some(&fresh), &user(4), 3, at));
        // Two steps behind, or a user at the global minimum, never.
        assert!(!may_be_raised_in_grace(Some(&fresh), &user(4), 2, at));
        assert!(!may_be_raised_in_grace(Some(&fresh), &user(2), 1, at));
        // Outside the grace period, or without any rotation, never.
        let stale = config(2, Some(301), 300);
        assert!(!may_be_raised_in_grace(Some(&stale), &user(4), 3, at));
        assert!(!may_be_raised_in_grace(None, &user(4), 3, at));
    }

    #[test]
    fn rotation_failures_name_no_store_internals() {
        let conflict = rotation_failure(StoreError::Conflict("unique violation".into()));
        assert!(matches!(conflict, RotationError::Failed(text) if text.contains("concurrent")));
        let other = rotation_failure(StoreError::Other("syntax error near SELECT".into()));
        assert!(
            matches!(other, RotationError::Failed(text) if !text.contains("SELECT")),
            "{other}"
        );
        let unavailable = rotation_failure(StoreError::Unavailable("pool timed out".into()));
        assert!(matches!(unavailable, RotationError::Store(_)));
    }

    #[test]
    fn a_rotation_carries_the_configured_grace() {
        let config = Config::new("http://localhost:8080", vec![7; 32])
            .expect("valid config")
            .with_rotation_grace(Duration::from_secs(120));
        let initiated_by = Uuid::now_v7();
        let rotation = new_rotation(&config, Some(initiated_by), "leaked key");
        assert_eq!(rotation.grace_period_seconds, 120);
        assert_eq!(rotation.initiated_by, Some(initiated_by));
        assert_eq!(rotation.reason, "leaked key");
    }
}
