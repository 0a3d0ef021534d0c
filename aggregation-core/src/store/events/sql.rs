//! The outbox of durable events: the one function that writes them, inside the caller's
//! transaction, and the reads of the audit list and the event stream.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{Event, EventType};
use crate::store::backend::{Backend, QueryBuilder, SqlStore, Tx, query};
use crate::store::sql::EVENTS_PER_STATEMENT;
use crate::store::{AuditFilter, EventStore, StoreError};

const SELECT_EVENT: &str = "SELECT id, type, user_id, occurred_at, data FROM events";

/// Writes `events` in the transaction of the change that caused them: the ONE place events are
/// written, so an event exists exactly when its change was committed.
///
/// Two statements per [`EVENTS_PER_STATEMENT`] events, none for no events: a revocation of
/// every session of a user raises one event per session, and a statement per event (plus one
/// per fan-out) would keep its transaction, and the locks it holds, open for as many round
/// trips.
pub(in crate::store) async fn insert_events<B: Backend>(
    tx: &mut Tx<B>,
    events: &[Event],
) -> Result<(), StoreError> {
    for chunk in events.chunks(EVENTS_PER_STATEMENT) {
        let mut insert =
            QueryBuilder::<B>::new("INSERT INTO events (id, type, user_id, occurred_at, data) ");
        insert.push_values(chunk, |mut row, event| {
            row.push_bind(event.id)
                .push_bind(event.event_type.as_str())
                .push_bind(event.user_id)
                .push_bind(event.occurred_at)
                .push_bind(event.data.to_string());
        });
        insert.build().execute(&mut **tx).await?;
        // Webhook fan-out in the same transaction: queued exactly when the events are committed.
        crate::store::webhooks::sql::queue_webhook_deliveries(tx, chunk).await?;
    }
    Ok(())
}

/// One stored event, its payload still JSON text.
#[derive(sqlx::FromRow)]
struct EventRow {
    id: Uuid,
    #[sqlx(rename = "type")]
    event_type: EventType,
    user_id: Option<Uuid>,
    occurred_at: DateTime<Utc>,
    data: String,
}

impl TryFrom<EventRow> for Event {
    type Error = StoreError;

    fn try_from(row: EventRow) -> Result<Self, StoreError> {
        let data = serde_json::from_str(&row.data).map_err(|error| {
            tracing::error!(event_id = %row.id, error = %error, "stored event payload is not JSON");
            StoreError::Other(format!("event {} has an unreadable payload", row.id))
        })?;
        Ok(Event {
            id: row.id,
            event_type: row.event_type,
            user_id: row.user_id,
            occurred_at: row.occurred_at,
            data,
        })
    }
}

fn decode(rows: Vec<EventRow>) -> Result<Vec<Event>, StoreError> {
    rows.into_iter().map(Event::try_from).collect()
}

#[async_trait]
impl<B: Backend> EventStore for SqlStore<B> {
    async fn user_events_after(
        &self,
        user_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        let mut query = QueryBuilder::<B>::new(SELECT_EVENT);
        query.push(" WHERE user_id = ").push_bind(user_id);
        if let Some(after) = after {
            query.push(" AND id > ").push_bind(after);
        }
        query
            .push(" ORDER BY id LIMIT ")
            .push_bind(i64::from(limit));
        decode(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn audit_events(&self, filter: &AuditFilter) -> Result<Vec<Event>, StoreError> {
        let mut query = QueryBuilder::<B>::new(SELECT_EVENT);
        query.push(" WHERE 1 = 1");
        if let Some(user_id) = filter.user_id {
            query.push(" AND user_id = ").push_bind(user_id);
        }
        if let Some(event_type) = filter.event_type {
            query.push(" AND type = ").push_bind(event_type.as_str());
        }
        if let Some(since) = filter.since {
            query.push(" AND occurred_at >= ").push_bind(since);
        }
        if let Some(until) = filter.until {
            query.push(" AND occurred_at < ").push_bind(until);
        }
        if let Some(after) = filter.after {
            query.push(" AND id > ").push_bind(after);
        }
        query
            .push(" ORDER BY id LIMIT ")
            .push_bind(i64::from(filter.limit));
        decode(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn purge_events_before(&self, cutoff: DateTime<Utc>) -> Result<u64, StoreError> {
        let deleted = query::<B>("DELETE FROM events WHERE occurred_at < $1")
            .bind(cutoff)
            .execute(&self.pool)
            .await?;
        Ok(deleted.rows_affected())
    }
}
