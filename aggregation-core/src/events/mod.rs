//! Domain events: what happened, for embedders to audit or forward.
//!
//! Two kinds live here. The durable [`Event`]s (`import.completed`, `sync.completed`,
//! `connection.*`, `session.revoked`, `password.changed`, `security.rotation`) are written to
//! the store's outbox in the transaction of the change that caused them, listed by the audit
//! endpoint, and published in process after the commit. The [`DomainEvent`]s below are the
//! in-process report of everything, durable or not.
//!
//! The service reports every event to one [`EventSink`]: the rate limiter's
//! `RateLimitCheck*` events, the account events (registration, login, logout, refresh,
//! reuse detection, password reset, session revocation), token rotations, imports, provider
//! connections, token refreshes and syncs. The default sink writes them to
//! `tracing`; implement the trait to send them elsewhere. Events never carry secrets.
//!
//! Each event is emitted by the use case that made it happen (authentication, sessions,
//! administration, imports, provider connections and syncs), never by the HTTP layer, so
//! every way of reaching a use case reports the same events.
//!
//! ```
//! use aggregation_core::events::{DomainEvent, EventSink};
//!
//! struct Audit;
//! impl EventSink for Audit {
//!     fn emit(&self, event: &DomainEvent) {
//!         if let DomainEvent::LoginSucceeded { user_id, .. } = event {
//!             println!("login by {user_id}");
//!         }
//!     }
//! }
//! ```

use std::sync::Arc;
#[cfg(feature = "testing")]
use std::sync::Mutex;

use serde::Serialize;
use uuid::Uuid;

use crate::rate_limit::{RateLimitEvent, RateLimitEvents};

mod bus;
mod outbox;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod raised;
#[cfg(feature = "redis")]
mod relay;

#[cfg(feature = "webhooks")]
pub(crate) use bus::WeakEventBus;
pub(crate) use bus::{EVENT_BUS_CAPACITY, EventBus};
pub use outbox::{Event, EventType};
#[cfg(feature = "redis")]
pub use relay::{EventRelayError, RedisEventRelay};

/// Something that happened in the service.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event")]
#[non_exhaustive]
pub enum DomainEvent {
    /// A user registered.
    UserRegistered {
        /// The new user.
        user_id: Uuid,
    },
    /// A user verified their email.
    EmailVerified {
        /// The user, when known.
        user_id: Option<Uuid>,
    },
    /// A login created a session.
    LoginSucceeded {
        /// The user.
        user_id: Uuid,
        /// The new session.
        session_id: Uuid,
    },
    /// A login failed (unknown email, wrong password, unverified email).
    LoginFailed {
        /// `invalid_credentials`, `email_not_verified`, or `too_many_failures` (the right
        /// password for an account throttled after failed logins; answered as
        /// `invalid_credentials`).
        reason: &'static str,
    },
    /// A refresh token was exchanged for a new pair.
    TokenRefreshed {
        /// The user.
        user_id: Uuid,
        /// The session.
        session_id: Uuid,
    },
    /// A rotated-away refresh token was presented again; its session was revoked.
    RefreshTokenReused {
        /// The user.
        user_id: Uuid,
        /// The revoked session.
        session_id: Uuid,
    },
    /// A user logged out.
    LoggedOut {
        /// The user.
        user_id: Uuid,
    },
    /// A password was reset and every session revoked.
    PasswordReset {
        /// The user.
        user_id: Uuid,
    },
    /// Sessions were revoked by their owner.
    SessionsRevoked {
        /// The user.
        user_id: Uuid,
        /// How many.
        count: u64,
    },
    /// An administrator raised a minimum refresh-token version.
    TokenVersionRotated {
        /// `global` or `user`.
        scope: &'static str,
        /// The user of a user rotation.
        user_id: Option<Uuid>,
        /// The minimum version before.
        previous_version: i64,
        /// The minimum version after.
        new_version: i64,
        /// The administrator who asked for it.
        initiated_by: Uuid,
    },
    /// A statement file was imported.
    StatementImported {
        /// The importing user.
        user_id: Uuid,
        /// The `file_import` connection written to (the first, for multi-institution files).
        connection_id: Option<Uuid>,
        /// `qfx` or `ofx`.
        format: &'static str,
        /// Accounts created.
        accounts_created: u64,
        /// Transactions created.
        transactions_created: u64,
        /// Transactions changed in place.
        transactions_updated: u64,
        /// Transactions already present, unchanged.
        transactions_skipped: u64,
    },
    /// A provider connection was authorized (created, or re-authorized in place).
    ProviderConnected {
        /// The user.
        user_id: Uuid,
        /// The connection.
        connection_id: Uuid,
        /// The provider.
        provider_slug: String,
        /// Whether an existing connection was re-authorized.
        reauthorized: bool,
    },
    /// A user disconnected a provider connection.
    ProviderDisconnected {
        /// The user.
        user_id: Uuid,
        /// The connection.
        connection_id: Uuid,
    },
    /// Provider tokens were refreshed, or a refresh failed.
    ProviderTokensRefreshed {
        /// The connection.
        connection_id: Uuid,
        /// Whether the provider issued new tokens.
        succeeded: bool,
    },
    /// A sync wrote provider data.
    ConnectionSynced {
        /// The connection's user.
        user_id: Uuid,
        /// The connection.
        connection_id: Uuid,
        /// `accounts`, `transactions` or `holdings`.
        kind: &'static str,
        /// Rows created.
        created: u64,
        /// Rows changed.
        updated: u64,
        /// Rows already equal.
        unchanged: u64,
        /// Holdings marked inactive.
        deactivated: u64,
        /// Items the provider answered that could not be used.
        errors: u64,
    },
    /// A rate-limit check event (`RateLimitCheckAttempted`, `…Allowed`, `…Denied`), carrying
    /// its own `event` name. Kept last: serde needs untagged variants at the end.
    #[serde(untagged)]
    RateLimit(RateLimitEvent),
}

/// Receives domain events. Called inline on the request path: keep it fast (queue elsewhere).
pub trait EventSink: Send + Sync + 'static {
    /// Handles one event.
    fn emit(&self, event: &DomainEvent);
}

/// Writes events to `tracing` (account events at info, rate-limit checks at debug).
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingEventSink;

impl EventSink for TracingEventSink {
    fn emit(&self, event: &DomainEvent) {
        match event {
            DomainEvent::RateLimit(event) => crate::rate_limit::TracingEvents.emit(event),
            other => {
                let fields = serde_json::to_string(other).unwrap_or_default();
                tracing::info!(target: "aggregation::events", event = %fields, "domain event");
            }
        }
    }
}

/// Keeps every event in memory, for tests.
#[cfg(feature = "testing")]
#[derive(Debug, Clone, Default)]
pub struct MemoryEventSink {
    events: Arc<Mutex<Vec<DomainEvent>>>,
}

#[cfg(feature = "testing")]
impl MemoryEventSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every event so far, oldest first.
    pub fn events(&self) -> Vec<DomainEvent> {
        self.events
            .lock()
            .map(|events| events.clone())
            .unwrap_or_default()
    }
}

#[cfg(feature = "testing")]
impl EventSink for MemoryEventSink {
    fn emit(&self, event: &DomainEvent) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event.clone());
        }
    }
}

/// Feeds the rate limiter's events into a domain sink.
pub(crate) struct SinkRateLimitEvents(pub(crate) Arc<dyn EventSink>);

impl RateLimitEvents for SinkRateLimitEvents {
    fn emit(&self, event: &RateLimitEvent) {
        self.0.emit(&DomainEvent::RateLimit(event.clone()));
    }
}
