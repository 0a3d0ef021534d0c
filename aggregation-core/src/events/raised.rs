//! The payload of each event type, built by the SQL store's write paths from what they wrote
//! (only the store knows the outcome: which sessions a revocation closed, a sync's counts).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{Event, EventType};
use crate::store::{
    ConnectionRecord, ImportCounts, NewTokenRotation, RotationOutcome, RotationScope, SyncCounts,
    UpsertCounts,
};

/// `{"created", "updated", "unchanged"}` of an upsert.
fn upserts(counts: &UpsertCounts) -> Value {
    json!({
        "created": counts.created,
        "updated": counts.updated,
        "unchanged": counts.unchanged,
    })
}

impl Event {
    /// `session.revoked`: a session of `user_id` was revoked for `reason` (`logout`,
    /// `token_reuse`, `password_reset`, `logout_all`, or the reason its owner gave).
    pub(crate) fn session_revoked(
        user_id: Uuid,
        session_id: Uuid,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Self {
        Self::new(
            EventType::SessionRevoked,
            Some(user_id),
            at,
            json!({ "session_id": session_id, "reason": reason }),
        )
    }

    /// `password.changed`: the user's password was replaced (`method`: `reset`).
    pub(crate) fn password_changed(user_id: Uuid, method: &str, at: DateTime<Utc>) -> Self {
        Self::new(
            EventType::PasswordChanged,
            Some(user_id),
            at,
            json!({ "method": method }),
        )
    }

    /// `connection.created`: a provider connection was authorized, created or (with
    /// `reauthorized`) re-authorized in place.
    pub(crate) fn connection_created(
        connection: &ConnectionRecord,
        reauthorized: bool,
        at: DateTime<Utc>,
    ) -> Self {
        Self::new(
            EventType::ConnectionCreated,
            Some(connection.user_id),
            at,
            json!({
                "connection_id": connection.id,
                "provider": connection.provider_slug,
                "reauthorized": reauthorized,
            }),
        )
    }

    /// `connection.expired`: the connection needs re-authorization (`reason`:
    /// `refresh_refused` when the provider refused its refresh token).
    pub(crate) fn connection_expired(
        user_id: Uuid,
        connection_id: Uuid,
        provider: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Self {
        Self::new(
            EventType::ConnectionExpired,
            Some(user_id),
            at,
            json!({ "connection_id": connection_id, "provider": provider, "reason": reason }),
        )
    }

    /// `connection.deleted`: the user disconnected the connection (its credentials are gone,
    /// its records kept).
    pub(crate) fn connection_deleted(connection: &ConnectionRecord, at: DateTime<Utc>) -> Self {
        Self::new(
            EventType::ConnectionDeleted,
            Some(connection.user_id),
            at,
            json!({ "connection_id": connection.id, "provider": connection.provider_slug }),
        )
    }

    /// `sync.completed`: a provider sync of the connection was written, with its counts per
    /// kind of record.
    pub(crate) fn sync_completed(
        user_id: Uuid,
        connection_id: Uuid,
        counts: &SyncCounts,
        at: DateTime<Utc>,
    ) -> Self {
        let mut holdings = upserts(&counts.holdings);
        holdings["deactivated"] = json!(counts.holdings_deactivated);
        Self::new(
            EventType::SyncCompleted,
            Some(user_id),
            at,
            json!({
                "connection_id": connection_id,
                "counts": {
                    "accounts": upserts(&counts.accounts),
                    "transactions": upserts(&counts.transactions),
                    "holdings": holdings,
                    "snapshots_created": counts.snapshots_created,
                },
            }),
        )
    }

    /// `import.completed`: a statement file was imported into the user's `file_import`
    /// connections, with its counts.
    pub(crate) fn import_completed(
        user_id: Uuid,
        counts: &ImportCounts,
        at: DateTime<Utc>,
    ) -> Self {
        Self::new(
            EventType::ImportCompleted,
            Some(user_id),
            at,
            json!({
                "connection_ids": counts.connection_ids,
                "counts": {
                    "accounts": {
                        "created": counts.accounts_created,
                        "updated": counts.accounts_updated,
                        "unchanged": counts.accounts_unchanged,
                    },
                    "transactions": {
                        "created": counts.transactions_created,
                        "updated": counts.transactions_updated,
                        "unchanged": counts.transactions_skipped,
                    },
                    "holdings": {
                        "created": counts.holdings_created,
                        "updated": counts.holdings_updated,
                        "unchanged": counts.holdings_unchanged,
                    },
                    "snapshots_created": counts.snapshots_created,
                },
            }),
        )
    }

    /// `security.rotation`: an administrator raised a minimum refresh-token version, globally
    /// (`user_id` `None`) or for `target` (the event's user).
    pub(crate) fn security_rotation(
        rotation: &NewTokenRotation,
        scope: RotationScope,
        target: Option<Uuid>,
        outcome: RotationOutcome,
    ) -> Self {
        Self::new(
            EventType::SecurityRotation,
            target,
            rotation.at,
            json!({
                "rotation_id": rotation.id,
                "scope": scope.as_str(),
                "target_user_id": target,
                "previous_version": outcome.previous_version,
                "new_version": outcome.new_version,
                "initiated_by": rotation.initiated_by,
            }),
        )
    }

    /// `webhook.disabled`: the user's webhook endpoint failed every attempt for too long and
    /// was disabled.
    pub(crate) fn webhook_disabled(user_id: Uuid, webhook_id: Uuid, at: DateTime<Utc>) -> Self {
        Self::new(
            EventType::WebhookDisabled,
            Some(user_id),
            at,
            json!({ "webhook_id": webhook_id }),
        )
    }
}
