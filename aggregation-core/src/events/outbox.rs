//! The durable events: what the store's outbox (`events` table) keeps, in the same transaction
//! as the change that caused each one, and what the audit list, webhooks and the event stream
//! hand out.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::enums::string_enum;

string_enum! {
    /// The type of an [`Event`], as named in its payload's `type`. Each has a typed payload
    /// (named after it) whose JSON is the event's `data`.
    EventType {
        /// A statement file was imported ([`ImportCompleted`](super::ImportCompleted)).
        ImportCompleted => "import.completed",
        /// A provider sync wrote its data ([`SyncCompleted`](super::SyncCompleted)).
        SyncCompleted => "sync.completed",
        /// A provider connection was authorized
        /// ([`ConnectionCreated`](super::ConnectionCreated)).
        ConnectionCreated => "connection.created",
        /// A provider connection needs re-authorization
        /// ([`ConnectionExpired`](super::ConnectionExpired)).
        ConnectionExpired => "connection.expired",
        /// A provider connection's access ends soon; the user should authorize it again
        /// ([`ConnectionExpiring`](super::ConnectionExpiring)).
        ConnectionExpiring => "connection.expiring",
        /// The user withdrew the connection's access at the provider
        /// ([`ConnectionRevoked`](super::ConnectionRevoked)).
        ConnectionRevoked => "connection.revoked",
        /// A provider connection was disconnected
        /// ([`ConnectionDeleted`](super::ConnectionDeleted)).
        ConnectionDeleted => "connection.deleted",
        /// A session was revoked ([`SessionRevoked`](super::SessionRevoked)).
        SessionRevoked => "session.revoked",
        /// A password was changed ([`PasswordChanged`](super::PasswordChanged)).
        PasswordChanged => "password.changed",
        /// An administrator rotated refresh-token versions
        /// ([`SecurityRotation`](super::SecurityRotation)).
        SecurityRotation => "security.rotation",
        /// A webhook endpoint that failed every attempt for 24 h was disabled; nothing more
        /// is sent to it until its owner enables it again
        /// ([`WebhookDisabled`](super::WebhookDisabled)).
        WebhookDisabled => "webhook.disabled",
        /// Transaction rows were matched as one real transaction or a transfer, or the user
        /// accepted a match ([`TransactionsMatched`](super::TransactionsMatched)).
        TransactionsMatched => "transactions.matched",
        /// The user rejected a transaction match
        /// ([`TransactionsUnmatched`](super::TransactionsUnmatched)).
        TransactionsUnmatched => "transactions.unmatched",
        /// A user's account was erased, on the user's request or an administrator's
        /// ([`UserDeleted`](super::UserDeleted)). The audit trail keeps it after every other
        /// row of the user is gone: the user id and the time, nothing else.
        UserDeleted => "user.deleted",
    }
}

/// One durable domain event, as stored and served: written to the store's outbox in the
/// transaction of the change that caused it, so it exists exactly when that change was
/// committed. Use cases build it from its typed payload
/// ([`DurableEvent::event_at`](super::DurableEvent::event_at)).
///
/// `data` carries ids and counts, never secrets (no tokens, credentials or password hashes).
///
/// ```
/// use aggregation_core::events::{DurableEvent, PasswordChanged};
///
/// let user_id = uuid::Uuid::now_v7();
/// let changed = PasswordChanged {
///     user_id,
///     method: PasswordChanged::RESET.to_owned(),
/// };
/// let event = changed.event_at(chrono::Utc::now());
/// assert_eq!(event.body()["type"], "password.changed");
/// assert_eq!(event.body()["data"], serde_json::json!({"method": "reset"}));
/// assert_eq!(PasswordChanged::read(&event), Some(changed));
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
            occurred_at: crate::dates::truncate_to_micros(occurred_at),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_names_the_type_and_keeps_the_payload() {
        let user_id = Uuid::now_v7();
        let session_id = Uuid::now_v7();
        let event =
            crate::events::SessionRevoked::each(user_id, &[session_id], "logout", Utc::now())
                .remove(0);
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
        assert_eq!(EventType::ALL.len(), 14);
    }
}
