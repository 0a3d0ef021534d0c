//! Domain events: what happened, for embedders to audit or forward.
//!
//! One model, owned by the domain. Each event is a Rust type built by the use case that made
//! it happen (authentication, sessions, administration, imports, provider connections and
//! syncs, webhook delivery), never by the HTTP layer or the store, so every way of reaching a
//! use case reports the same events. There are two forms:
//!
//! - **Durable events** ([`Event`]): `import.completed`, `sync.completed`, `connection.*`,
//!   `session.revoked`, `password.changed`, `security.rotation`, `webhook.disabled`. Each type
//!   has a typed payload ([`SessionRevoked`], [`SyncCompleted`], … implementing
//!   [`DurableEvent`]) whose serde JSON is the event's `data`. The use case hands them to the
//!   store with its change, which writes them to its outbox in the same transaction; where
//!   they depend on what the transaction found (the sessions that were live, a sync's counts,
//!   a rotation's versions) the use case hands its rule instead, a [`RaiseEvents`] the store
//!   calls inside the transaction. The store knows no event rules: it writes what it is
//!   given. The audit endpoint lists them, webhooks and the event stream (its catch-up and
//!   cursor live here, in `stream`) serve them, and they are published in process after the
//!   commit.
//! - **Reports** ([`DomainEvent`]): the in-process account of everything, durable or not,
//!   given to one [`EventSink`]. Where a report and a durable event describe the same thing
//!   the report is derived from the durable one once it is committed
//!   ([`DurableEvent::report`]: `connection.created` is reported as
//!   [`DomainEvent::ProviderConnected`], `connection.expired` as a failed
//!   [`DomainEvent::ProviderTokensRefreshed`], a reset's `password.changed` as
//!   [`DomainEvent::PasswordReset`], an administrator's `security.rotation` as
//!   [`DomainEvent::TokenVersionRotated`]). The others carry what the outbox does not keep
//!   (an import's file format, a sync's per-kind errors) or happen with no durable change
//!   (logins, logouts of unknown tokens, rate-limit checks), and are reported directly.
//!
//! A use case reports through one handle that publishes committed durable events, reports
//! the derived [`DomainEvent`]s, and reports the others.
//!
//! The sink receives the rate limiter's `RateLimitCheck*` events, the account events
//! (registration, login, logout, refresh, reuse detection, password reset, session
//! revocation), token rotations, imports, provider connections, token refreshes and syncs.
//! The default sink writes them to `tracing`; implement the trait to send them elsewhere.
//! Events never carry secrets.
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
mod durable;
mod outbox;
#[cfg(feature = "redis")]
mod relay;
pub(crate) mod stream;

#[cfg(feature = "webhooks")]
pub(crate) use bus::WeakEventBus;
pub(crate) use bus::{EVENT_BUS_CAPACITY, EventBus, Events};
pub use durable::{
    ConnectionCreated, ConnectionDeleted, ConnectionExpired, ConnectionExpiring, ConnectionRevoked,
    DurableEvent, HoldingCounts, ImportCompleted, ImportCompletedCounts, PasswordChanged,
    RotationScope, RowCounts, SecurityRotation, SessionRevoked, SyncCompleted, SyncCompletedCounts,
    TransactionMatchChange, TransactionsMatched, TransactionsUnmatched, UserDeleted,
    WebhookDisabled,
};
pub use outbox::{Event, EventType};
pub(crate) use stream::{EventStream, StreamItem};

/// A use case's rule for the durable events of a store change that depend on what the
/// change found (`T`: the sessions it revoked, a sync's counts, a rotation's versions). The
/// store calls it inside the change's transaction and writes exactly the events it returns.
/// `'a`: how long the rule may borrow (the call's duration, written `'_`).
pub type RaiseEvents<'a, T> = dyn Fn(&T) -> Vec<Event> + Send + Sync + 'a;
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
