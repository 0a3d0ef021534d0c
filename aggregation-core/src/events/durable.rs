//! The typed payload of each durable event type. A use case builds the payload of what it
//! made happen and turns it into the [`Event`] the store writes ([`DurableEvent::event_at`]);
//! the event's `data` is the payload's serde JSON, so the stored and served JSON has exactly
//! the payload's fields. The event's user is the payload's [`user_id`](DurableEvent::user_id),
//! which `data` does not repeat (but a security rotation's `target_user_id`).

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{DomainEvent, Event, EventType};
use crate::enums::string_enum;

/// A typed durable event payload: its [`EventType`], its user, and the [`DomainEvent`] it is
/// reported as once committed (when it has an in-process form).
pub trait DurableEvent: Serialize + DeserializeOwned {
    /// The type of the events with this payload.
    const TYPE: EventType;

    /// The user the event concerns; `None` only for a global security rotation.
    fn user_id(&self) -> Option<Uuid>;

    /// What the sink is told once the event is committed; `None` when the event has no
    /// in-process report of its own.
    fn report(&self) -> Option<DomainEvent> {
        None
    }

    /// The event carrying this payload, with a fresh id, as of `occurred_at`.
    fn event_at(&self, occurred_at: DateTime<Utc>) -> Event {
        // Serializing these plain structs cannot fail (no maps with non-string keys).
        let data = serde_json::to_value(self).unwrap_or_default();
        Event::new(Self::TYPE, self.user_id(), occurred_at, data)
    }

    /// The payload of `event`, when it is of this type and its `data` has this shape.
    fn read(event: &Event) -> Option<Self> {
        if event.event_type != Self::TYPE {
            return None;
        }
        let mut data = event.data.clone();
        // `data` leaves out the user, which is the event's.
        data.as_object_mut()?.insert(
            "user_id".to_owned(),
            serde_json::to_value(event.user_id).ok()?,
        );
        serde_json::from_value(data).ok()
    }
}

impl DomainEvent {
    /// The in-process report of a committed durable event, when its type has one
    /// ([`DurableEvent::report`]).
    pub(crate) fn of_committed(event: &Event) -> Option<Self> {
        match event.event_type {
            EventType::ConnectionCreated => ConnectionCreated::read(event)?.report(),
            EventType::ConnectionExpired => ConnectionExpired::read(event)?.report(),
            EventType::PasswordChanged => PasswordChanged::read(event)?.report(),
            EventType::SecurityRotation => SecurityRotation::read(event)?.report(),
            _ => None,
        }
    }
}

/// `{"created", "updated", "unchanged"}`: what an upsert of one kind of record did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowCounts {
    /// Rows inserted.
    pub created: u64,
    /// Rows changed.
    pub updated: u64,
    /// Rows already equal.
    pub unchanged: u64,
}

/// `import.completed`: a statement file was imported into the user's `file_import`
/// connections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportCompleted {
    /// The importing user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The connection of each institution of the file, in file order.
    pub connection_ids: Vec<Uuid>,
    /// What was written.
    pub counts: ImportCompletedCounts,
}

/// The counts of an [`ImportCompleted`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportCompletedCounts {
    /// Accounts.
    pub accounts: RowCounts,
    /// Transactions (`unchanged`: already present, skipped).
    pub transactions: RowCounts,
    /// Holdings.
    pub holdings: RowCounts,
    /// Balance snapshots written.
    pub snapshots_created: u64,
}

impl DurableEvent for ImportCompleted {
    const TYPE: EventType = EventType::ImportCompleted;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }
}

/// `sync.completed`: a provider sync of the connection was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncCompleted {
    /// The connection's user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The connection.
    pub connection_id: Uuid,
    /// What was written.
    pub counts: SyncCompletedCounts,
}

/// The counts of a [`SyncCompleted`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncCompletedCounts {
    /// Accounts.
    pub accounts: RowCounts,
    /// Transactions, summed over accounts.
    pub transactions: RowCounts,
    /// Holdings, summed over accounts.
    pub holdings: HoldingCounts,
    /// Balance snapshots written.
    pub snapshots_created: u64,
}

/// [`RowCounts`] of holdings, with those marked inactive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldingCounts {
    /// Rows inserted.
    pub created: u64,
    /// Rows changed.
    pub updated: u64,
    /// Rows already equal.
    pub unchanged: u64,
    /// Holdings marked inactive because the provider no longer lists them.
    pub deactivated: u64,
}

impl DurableEvent for SyncCompleted {
    const TYPE: EventType = EventType::SyncCompleted;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }
}

/// `connection.created`: a provider connection was authorized, created or re-authorized in
/// place. Reported as [`DomainEvent::ProviderConnected`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionCreated {
    /// The connection's user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The connection.
    pub connection_id: Uuid,
    /// The provider's slug.
    pub provider: String,
    /// Whether an existing connection was re-authorized.
    pub reauthorized: bool,
}

impl DurableEvent for ConnectionCreated {
    const TYPE: EventType = EventType::ConnectionCreated;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }

    fn report(&self) -> Option<DomainEvent> {
        Some(DomainEvent::ProviderConnected {
            user_id: self.user_id,
            connection_id: self.connection_id,
            provider_slug: self.provider.clone(),
            reauthorized: self.reauthorized,
        })
    }
}

/// `connection.expired`: the connection needs re-authorization. Reported as a failed
/// [`DomainEvent::ProviderTokensRefreshed`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionExpired {
    /// The connection's user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The connection.
    pub connection_id: Uuid,
    /// The provider's slug.
    pub provider: String,
    /// Why: `refresh_refused` when the provider refused its refresh token, `consent_expired`
    /// when the user's consent ended, `access_revoked` when the provider refused credentials
    /// that cannot be renewed (a SimpleFIN access URL the user revoked at the bridge),
    /// `login_required` when the provider's webhook said the user must sign in again
    /// (Plaid's `ITEM_LOGIN_REQUIRED`).
    pub reason: String,
}

impl DurableEvent for ConnectionExpired {
    const TYPE: EventType = EventType::ConnectionExpired;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }

    fn report(&self) -> Option<DomainEvent> {
        Some(DomainEvent::ProviderTokensRefreshed {
            connection_id: self.connection_id,
            succeeded: false,
        })
    }
}

/// `connection.expiring`: the provider says the connection's access ends soon (Plaid's
/// `PENDING_EXPIRATION` or `PENDING_DISCONNECT`); authorizing it again keeps it working.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionExpiring {
    /// The connection's user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The connection.
    pub connection_id: Uuid,
    /// The provider's slug.
    pub provider: String,
    /// Why, as the provider said (`pending_expiration`, `pending_disconnect`).
    pub reason: String,
}

impl DurableEvent for ConnectionExpiring {
    const TYPE: EventType = EventType::ConnectionExpiring;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }
}

/// `connection.revoked`: the provider says the user withdrew the connection's access there
/// (Plaid's `USER_PERMISSION_REVOKED`); the connection is `revoked` and needs connecting again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionRevoked {
    /// The connection's user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The connection.
    pub connection_id: Uuid,
    /// The provider's slug.
    pub provider: String,
    /// Why: `permission_revoked` when the provider's webhook said the user withdrew the
    /// access (Plaid's `USER_PERMISSION_REVOKED`).
    pub reason: String,
}

impl DurableEvent for ConnectionRevoked {
    const TYPE: EventType = EventType::ConnectionRevoked;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }
}

/// `connection.deleted`: the user disconnected the connection (its credentials are gone, its
/// records kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionDeleted {
    /// The connection's user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The connection.
    pub connection_id: Uuid,
    /// The provider's slug.
    pub provider: String,
}

impl DurableEvent for ConnectionDeleted {
    const TYPE: EventType = EventType::ConnectionDeleted;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }
}

/// `session.revoked`: a session was revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRevoked {
    /// The session's user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The session.
    pub session_id: Uuid,
    /// `logout`, `token_reuse`, `password_reset`, `logout_all`, or the reason its owner gave.
    pub reason: String,
}

impl SessionRevoked {
    /// One `session.revoked` event per session of `user_id` in `session_ids`, in that order.
    pub fn each(
        user_id: Uuid,
        session_ids: &[Uuid],
        reason: &str,
        at: DateTime<Utc>,
    ) -> Vec<Event> {
        session_ids
            .iter()
            .map(|session_id| {
                Self {
                    user_id,
                    session_id: *session_id,
                    reason: reason.to_owned(),
                }
                .event_at(at)
            })
            .collect()
    }
}

impl DurableEvent for SessionRevoked {
    const TYPE: EventType = EventType::SessionRevoked;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }
}

/// `password.changed`: the user's password was replaced. Reported as
/// [`DomainEvent::PasswordReset`] when it was reset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasswordChanged {
    /// The user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// How: `reset`.
    pub method: String,
}

impl PasswordChanged {
    /// The `method` of a password reset with an emailed token.
    pub const RESET: &'static str = "reset";
}

impl DurableEvent for PasswordChanged {
    const TYPE: EventType = EventType::PasswordChanged;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }

    fn report(&self) -> Option<DomainEvent> {
        (self.method == Self::RESET).then_some(DomainEvent::PasswordReset {
            user_id: self.user_id,
        })
    }
}

/// `user.deleted`: the user's account was erased. `data` is empty: the audit trail keeps the
/// user id and the time only, no email or other personal data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserDeleted {
    /// The erased user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
}

impl DurableEvent for UserDeleted {
    const TYPE: EventType = EventType::UserDeleted;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }
}

string_enum! {
    /// What a token rotation applies to.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    RotationScope {
        /// Every user's refresh tokens.
        Global => "global",
        /// One user's refresh tokens.
        User => "user",
    }
}

/// `security.rotation`: an administrator raised a minimum refresh-token version, globally or
/// for one user (the event's user). Reported as [`DomainEvent::TokenVersionRotated`] when an
/// administrator asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityRotation {
    /// The rotation's audit id.
    pub rotation_id: Uuid,
    /// Global or one user.
    pub scope: RotationScope,
    /// The user of a user rotation; `None` for a global one.
    pub target_user_id: Option<Uuid>,
    /// The minimum version before.
    pub previous_version: i64,
    /// The minimum version after.
    pub new_version: i64,
    /// The administrator who asked for it; `None` for the host itself.
    pub initiated_by: Option<Uuid>,
}

impl DurableEvent for SecurityRotation {
    const TYPE: EventType = EventType::SecurityRotation;

    fn user_id(&self) -> Option<Uuid> {
        self.target_user_id
    }

    fn report(&self) -> Option<DomainEvent> {
        Some(DomainEvent::TokenVersionRotated {
            scope: self.scope.as_str(),
            user_id: self.target_user_id,
            previous_version: self.previous_version,
            new_version: self.new_version,
            initiated_by: self.initiated_by?,
        })
    }
}

/// `webhook.disabled`: the user's webhook endpoint failed every attempt for too long and was
/// disabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookDisabled {
    /// The endpoint's user.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The endpoint.
    pub webhook_id: Uuid,
}

impl DurableEvent for WebhookDisabled {
    const TYPE: EventType = EventType::WebhookDisabled;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.user_id)
    }
}

/// What `transactions.matched` and `transactions.unmatched` tell about a transaction match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionMatchChange {
    /// The owner of the rows.
    #[serde(skip_serializing)]
    pub user_id: Uuid,
    /// The match.
    pub match_id: Uuid,
    /// `duplicate` or `transfer`.
    pub kind: String,
    /// Its status now: `automatic` or `suggested` when the reconciler made it, `accepted` or
    /// `rejected` when the user decided it.
    pub status: String,
    /// The rows it is about that exist now.
    pub transaction_ids: Vec<Uuid>,
}

/// `transactions.matched`: the reconciler matched rows (a duplicate held back or suggested,
/// a transfer paired or suggested), or the user accepted a match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionsMatched(pub TransactionMatchChange);

impl DurableEvent for TransactionsMatched {
    const TYPE: EventType = EventType::TransactionsMatched;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.0.user_id)
    }
}

/// `transactions.unmatched`: the user rejected a match (a held-back duplicate written, a
/// transfer unpaired, a suggestion dismissed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionsUnmatched(pub TransactionMatchChange);

impl DurableEvent for TransactionsUnmatched {
    const TYPE: EventType = EventType::TransactionsUnmatched;

    fn user_id(&self) -> Option<Uuid> {
        Some(self.0.user_id)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn payloads_serialize_to_the_stored_shape() {
        let user_id = Uuid::now_v7();
        let connection_id = Uuid::now_v7();
        let event = SyncCompleted {
            user_id,
            connection_id,
            counts: SyncCompletedCounts {
                accounts: RowCounts {
                    created: 1,
                    updated: 2,
                    unchanged: 3,
                },
                transactions: RowCounts::default(),
                holdings: HoldingCounts {
                    created: 4,
                    updated: 0,
                    unchanged: 0,
                    deactivated: 5,
                },
                snapshots_created: 6,
            },
        }
        .event_at(Utc::now());
        assert_eq!(event.event_type, EventType::SyncCompleted);
        assert_eq!(event.user_id, Some(user_id));
        assert_eq!(
            event.data,
            json!({
                "connection_id": connection_id,
                "counts": {
                    "accounts": {"created": 1, "updated": 2, "unchanged": 3},
                    "transactions": {"created": 0, "updated": 0, "unchanged": 0},
                    "holdings": {"created": 4, "updated": 0, "unchanged": 0, "deactivated": 5},
                    "snapshots_created": 6,
                },
            })
        );
    }

    #[test]
    fn a_committed_event_is_read_back_and_reported() {
        let user_id = Uuid::now_v7();
        let connection_id = Uuid::now_v7();
        let created = ConnectionCreated {
            user_id,
            connection_id,
            provider: "schwab".to_owned(),
            reauthorized: true,
        };
        let event = created.event_at(Utc::now());
        assert_eq!(
            event.data,
            json!({"connection_id": connection_id, "provider": "schwab", "reauthorized": true})
        );
        assert_eq!(ConnectionCreated::read(&event), Some(created));
        assert_eq!(
            DomainEvent::of_committed(&event),
            Some(DomainEvent::ProviderConnected {
                user_id,
                connection_id,
                provider_slug: "schwab".to_owned(),
                reauthorized: true,
            })
        );
        let revoked = SessionRevoked::each(user_id, &[Uuid::now_v7()], "logout", Utc::now());
        assert_eq!(DomainEvent::of_committed(&revoked[0]), None);
        assert_eq!(ConnectionCreated::read(&revoked[0]), None);
    }

    #[test]
    fn a_host_rotation_has_no_report() {
        let rotation = SecurityRotation {
            rotation_id: Uuid::now_v7(),
            scope: RotationScope::Global,
            target_user_id: None,
            previous_version: 0,
            new_version: 1,
            initiated_by: None,
        };
        let event = rotation.event_at(Utc::now());
        assert_eq!(event.user_id, None);
        assert_eq!(event.data["scope"], "global");
        assert_eq!(event.data["target_user_id"], serde_json::Value::Null);
        assert_eq!(DomainEvent::of_committed(&event), None);
    }
}
