//! The outbox of durable [`Event`]s: read by the audit list and the event stream, purged by
//! the retention job. Events are written by the store's write paths that take them from the
//! use case (as a list or a [`RaiseEvents`](crate::events::RaiseEvents) rule), inside the
//! transaction of the change that caused them: the store persists them as given.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreError;
use crate::events::stream::MissedEvents;
use crate::events::{Event, EventType};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// What [`EventStore::audit_events`] lists: every filter optional, combined with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only events of this user.
    pub user_id: Option<Uuid>,
    /// Only events of this type.
    pub event_type: Option<EventType>,
    /// Only events that occurred at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only events that occurred before this instant.
    pub until: Option<DateTime<Utc>>,
    /// Keyset cursor: only events whose id is greater (exclusive).
    pub after: Option<Uuid>,
    /// At most this many events.
    pub limit: u32,
}

/// The outbox of durable events. Its rows are the events the use cases handed to the other
/// store traits' writes, as given: implementing it is reading them back, nothing more.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// The user's events with an id greater than `after` (all when `None`), oldest first, at
    /// most `limit`: what a client resuming from `Last-Event-ID` missed.
    async fn user_events_after(
        &self,
        user_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError>;

    /// The events matching `filter`, in id order (oldest first), at most `filter.limit`.
    async fn audit_events(&self, filter: &AuditFilter) -> Result<Vec<Event>, StoreError>;

    /// Deletes the events that occurred before `cutoff`; how many.
    async fn purge_events_before(&self, cutoff: DateTime<Utc>) -> Result<u64, StoreError>;
}

#[async_trait]
impl<S: EventStore + ?Sized> MissedEvents for std::sync::Arc<S> {
    async fn user_events_after(
        &self,
        user_id: Uuid,
        after: Uuid,
        limit: u32,
    ) -> Result<Vec<Event>, Box<dyn std::error::Error + Send + Sync>> {
        Ok(EventStore::user_events_after(&**self, user_id, Some(after), limit).await?)
    }
}
