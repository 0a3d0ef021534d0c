//! Administration: the admin role, refresh-token version rotations (global and per user), the
//! security configuration, the status of the background jobs and the audit trail (the durable
//! events of every user).
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
//! The token-version rule itself (what a rotation raises, which versions still pass) lives in
//! `auth::token_version`; this module checks the role, runs the rotations and reports each as a
//! [`DomainEvent::TokenVersionRotated`](crate::events::DomainEvent::TokenVersionRotated)
//! (derived from its `security.rotation` event).

use std::sync::Arc;

use uuid::Uuid;

use crate::auth::token_version::{self, RotationError};
pub(crate) use crate::auth::token_version::{GlobalRotation, UserRotation};
use crate::config::Config;
use crate::events::{Event, Events};
use crate::jobs::JobsStatus;
use crate::store::{AuditFilter, Role, SecurityConfigRecord, Store, StoreError, now};

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
    let normalized = crate::email::normalize_email(email);
    let Some(user) = store.user_by_email(&normalized).await? else {
        return Err(AdminError::UnknownEmail(email.trim().to_owned()));
    };
    Ok(store.grant_role(user.id, Role::Admin, now()).await?)
}

impl From<RotationError> for AdminError {
    fn from(error: RotationError) -> Self {
        match error {
            RotationError::UnknownUser(user_id) => AdminError::UnknownUser(user_id),
            RotationError::Failed(why) => AdminError::RotationFailed(why.to_owned()),
            RotationError::Store(error) => AdminError::Store(error),
        }
    }
}

/// The administrative use cases over a store.
#[derive(Clone)]
pub(crate) struct Admin {
    store: Arc<dyn Store>,
    config: Arc<Config>,
    events: Events,
}

impl Admin {
    pub(crate) fn new(store: Arc<dyn Store>, config: Arc<Config>, events: Events) -> Self {
        Self {
            store,
            config,
            events,
        }
    }

    /// Checks in the store that the user holds the admin role.
    pub(crate) async fn require_admin(&self, user_id: Uuid) -> Result<(), AdminError> {
        if self.store.user_roles(user_id).await?.contains(&Role::Admin) {
            Ok(())
        } else {
            Err(AdminError::NotAdmin)
        }
    }

    /// See [`grant_admin_by_email`].
    pub(crate) async fn grant_admin_by_email(&self, email: &str) -> Result<bool, AdminError> {
        grant_admin_by_email(&*self.store, email).await
    }

    /// Grants the `admin` role to every existing account among [`Config::admin_emails`] whose
    /// email is verified; the number granted now.
    pub(crate) async fn grant_configured_admins(&self) -> Result<usize, AdminError> {
        let mut granted = 0;
        for email in self.config.admin_emails() {
            // Unverified accounts get the role when they verify (see `Auth::verify_email`).
            let Some(user) = self.store.user_by_email(email).await? else {
                continue;
            };
            if user.email_verified_at.is_some()
                && self.store.grant_role(user.id, Role::Admin, now()).await?
            {
                granted += 1;
            }
        }
        Ok(granted)
    }

    /// Raises the global minimum token version by one step, with the configured grace period.
    pub(crate) async fn rotate_global(
        &self,
        initiated_by: Uuid,
        reason: &str,
    ) -> Result<GlobalRotation, AdminError> {
        let mut raised = Vec::new();
        let rotation = token_version::rotate_global(
            &*self.store,
            &self.config,
            Some(initiated_by),
            reason,
            &mut raised,
        )
        .await?;
        // Reported as `TokenVersionRotated`, from its `security.rotation` event.
        self.events.committed(&raised);
        Ok(rotation)
    }

    /// Raises one user's minimum token version, invalidating every refresh token they hold.
    pub(crate) async fn rotate_user(
        &self,
        initiated_by: Uuid,
        user_id: Uuid,
        reason: &str,
    ) -> Result<UserRotation, AdminError> {
        let mut raised = Vec::new();
        let rotation = token_version::rotate_user(
            &*self.store,
            &self.config,
            Some(initiated_by),
            user_id,
            reason,
            &mut raised,
        )
        .await?;
        // Reported as `TokenVersionRotated`, from its `security.rotation` event.
        self.events.committed(&raised);
        Ok(rotation)
    }

    /// The security configuration, created with defaults (version 0, the configured grace)
    /// when none exists.
    pub(crate) async fn security_config(&self) -> Result<SecurityConfigRecord, AdminError> {
        Ok(self
            .store
            .ensure_security_config(token_version::seconds(self.config.rotation_grace()), now())
            .await?)
    }

    /// The durable events matching `filter`, oldest first (the audit trail).
    pub(crate) async fn audit_events(
        &self,
        filter: &AuditFilter,
    ) -> Result<Vec<Event>, AdminError> {
        Ok(self.store.audit_events(filter).await?)
    }

    /// The background jobs as their runs are recorded in the store.
    pub(crate) async fn jobs_status(&self) -> Result<JobsStatus, AdminError> {
        Ok(crate::jobs::status(&*self.store, &self.config).await?)
    }
}
