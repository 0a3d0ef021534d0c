//! The durable events: what the store's outbox (`events` table) keeps, in the same transaction
//! as the change that caused each one, and what the audit list, webhooks and the event stream
//! hand out.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::enums::string_enum;
use crate::store::{
    ConnectionRecord, ImportCounts, NewTokenRotation, RotationOutcome, RotationScope, SyncCounts,
    UpsertCounts,
};

string_enum! {
    /// The type of an [`Event`], as named in its payload's `type`.
    EventType {
        /// A statement file was imported (`data`: `import_id`, `format`, `connection_ids`,
        /// `account_ids`, `counts`).
        ImportCompleted => "import.completed",
        /// A provider sync wrote its data (`data`: `connection_id`, `kind`, `counts`).
        SyncCompleted => "sync.completed",
        /// A provider connection was authorized (`data`: `connection_id`, `provider`,
        /// `reauthorized`).
        ConnectionCreated => "connection.created",
        /// A provider connection needs re-authorization (`data`: `connection_id`, `provider`,
        /// `reason`).
        ConnectionExpired => "connection.expired",
        /// A provider connection was disconnected (`data`: `connection_id`, `provider`).
        ConnectionDeleted => "connection.deleted",
        /// A session was revoked (`data`: `session_id`, `reason`).
        SessionRevoked => "session.revoked",
        /// A password was changed (`data`: `method`).
        PasswordChanged => "password.changed",
        /// An administrator rotated refresh-token versions (`data`: `rotation_id`, `scope`,
        /// `target_user_id`, `previous_version`, `new_version`, `initiated_by`).
        SecurityRotation => "security.rotation",
    }
}

/// One durable domain event: written to the store's outbox in the transaction of the change
/// that caused it, so it exists exactly when that change was committed.
///
/// `data` carries ids and counts, never secrets (no tokens, credentials or password hashes).
///
/// ```
/// use aggregation_core::events::{Event, EventType};
///
/// let user_id = uuid::Uuid::now_v7();
/// let event = Event::new(
///     EventType::PasswordChanged,
///     Some(user_id),
///     chrono::Utc::now(),
///     serde_json::json!({"method": "reset"}),
/// );
/// assert_eq!(event.body()["type"], "password.changed");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Id (UUIDv7): orders events by the time they were raised.
    pub id: Uuid,
    /// What happened.
    pub event_type: EventType,
    /// The user it concerns; `None` only for a global security rotation.
    pub user_id: Option<Uuid>,
    /// When it happened (microsecond precision, as stored).
    pub occurred_at: DateTime<Utc>,
    /// The payload: ids and counts, never secrets.
    pub data: Value,
}

impl Event {
    /// A new event with a fresh UUIDv7 id; `occurred_at` is truncated to microseconds, the
    /// precision both stores keep.
    pub fn new(
        event_type: EventType,
        user_id: Option<Uuid>,
        occurred_at: DateTime<Utc>,
        data: Value,
    ) -> Self {
        Self {
            id: Uuid::now_v7(),
            event_type,
            user_id,
            occurred_at: crate::store::truncate_to_micros(occurred_at),
            data,
        }
    }

    /// The wire form shared by the audit list, webhooks and the event stream:
    /// `{"id", "type", "user_id", "occurred_at", "data"}`.
    pub fn body(&self) -> Value {
        json!({
            "id": self.id,
            "type": self.event_type.as_str(),
            "user_id": self.user_id,
            "occurred_at": self.occurred_at,
            "data": self.data,
        })
    }

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
}

/// `{"created", "updated", "unchanged"}` of an upsert.
fn upserts(counts: &UpsertCounts) -> Value {
    json!({
        "created": counts.created,
        "updated": counts.updated,
        "unchanged": counts.unchanged,
    })
}

impl Event {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_names_the_type_and_keeps_the_payload() {
        let user_id = Uuid::now_v7();
        let session_id = Uuid::now_v7();
        let event = Event::session_revoked(user_id, session_id, "logout", Utc::now());
        let body = event.body();
        assert_eq!(body["type"], "session.revoked");
        assert_eq!(body["id"], event.id.to_string());
        assert_eq!(body["user_id"], user_id.to_string());
        assert_eq!(body["data"]["session_id"], session_id.to_string());
        assert_eq!(body["data"]["reason"], "logout");
        assert!(
            body["occurred_at"]
                .as_str()
                .is_some_and(|at| at.ends_with('Z'))
        );
    }

    #[test]
    fn type_names_round_trip() {
        for event_type in EventType::ALL {
            assert_eq!(EventType::parse(event_type.as_str()), Some(*event_type));
        }
        assert_eq!(EventType::ALL.len(), 8);
    }
}
