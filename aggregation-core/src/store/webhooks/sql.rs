//! Webhook endpoints, deliveries and attempts.
//!
//! A delivery is keyed by (endpoint, event): the outbox's fan-out inserts at most one per pair
//! whatever is retried, and the event id is the `webhook-id` receivers deduplicate on.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, QueryBuilder, SqlStore, Tx, query, query_as, query_scalar};
use crate::store::events::sql::insert_events;
use crate::store::records::sql::connections::lock_user_in;
use crate::store::{
    ClaimedDelivery, DeliveryClaim, DeliveryStatus, DisabledWebhook, NewWebhookEndpoint,
    NextDelivery, StoreError, WebhookAttempt, WebhookAttemptRecord, WebhookDeliveryRecord,
    WebhookEndpointRecord, WebhookStore,
};

/// The columns of an [`EndpointRow`] (a macro, so `concat!` can build on it).
macro_rules! endpoint_columns {
    () => {
        "id, user_id, url, event_types, encrypted_secret, secret_key_id, created_at, \
         updated_at, disabled_at, previous_secret_expires_at"
    };
}

/// The columns of an [`EndpointRow`], for `RETURNING`.
const ENDPOINT_COLUMNS: &str = endpoint_columns!();

/// The endpoints table, to read [`EndpointRow`]s from.
const SELECT_ENDPOINT: &str = concat!("SELECT ", endpoint_columns!(), " FROM webhook_endpoints");

/// The stored form of an endpoint's event types: `",a,b,"` (every name framed by commas, so
/// one `LIKE '%,name,%'` matches it), or empty for every type.
fn framed_types(names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(",{},", names.join(","))
    }
}

/// The names of a stored `",a,b,"` list.
fn unframed_types(stored: &str) -> Vec<String> {
    stored
        .split(',')
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

#[derive(sqlx::FromRow)]
struct EndpointRow {
    id: Uuid,
    user_id: Uuid,
    url: String,
    event_types: String,
    encrypted_secret: Vec<u8>,
    secret_key_id: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    disabled_at: Option<DateTime<Utc>>,
    previous_secret_expires_at: Option<DateTime<Utc>>,
}

impl From<EndpointRow> for WebhookEndpointRecord {
    fn from(row: EndpointRow) -> Self {
        Self {
            id: row.id,
            user_id: row.user_id,
            url: row.url,
            event_types: unframed_types(&row.event_types),
            encrypted_secret: row.encrypted_secret,
            secret_key_id: row.secret_key_id,
            created_at: row.created_at,
            updated_at: row.updated_at,
            disabled_at: row.disabled_at,
            previous_secret_expires_at: row.previous_secret_expires_at,
        }
    }
}

/// What sending a claimed delivery needs of its endpoint.
#[derive(sqlx::FromRow)]
struct SendingRow {
    id: Uuid,
    url: String,
    encrypted_secret: Vec<u8>,
    secret_key_id: String,
    previous_encrypted_secret: Option<Vec<u8>>,
    previous_secret_key_id: Option<String>,
    previous_secret_expires_at: Option<DateTime<Utc>>,
}

/// Claims serialize on this PostgreSQL advisory lock (held to the claim's commit), so the
/// per-endpoint count of leased deliveries one claim reads cannot be overtaken by another's.
/// SQLite needs none: a claim's `BEGIN IMMEDIATE` already runs claims one after another.
const CLAIM_LOCK: i64 = 7_243_100_118;

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    event_id: Uuid,
    event_type: String,
    status: String,
    attempt_count: i32,
    created_at: DateTime<Utc>,
    next_attempt_at: Option<DateTime<Utc>>,
    delivered_at: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
struct AttemptRow {
    event_id: Uuid,
    attempt: i32,
    attempted_at: DateTime<Utc>,
    status_code: Option<i32>,
    error: Option<String>,
}

#[derive(sqlx::FromRow)]
struct ClaimRow {
    endpoint_id: Uuid,
    event_id: Uuid,
    payload: String,
    attempt_count: i32,
    created_at: DateTime<Utc>,
}

/// The exact body a delivery of `event` sends and signs: `{"id", "type", "occurred_at",
/// "data"}`.
fn delivery_payload(event: &Event) -> String {
    serde_json::json!({
        "id": event.id,
        "type": event.event_type.as_str(),
        "occurred_at": event.occurred_at,
        "data": event.data,
    })
    .to_string()
}

/// Queues one pending delivery of each of `events` for every endpoint of its user that
/// receives its type, in one statement, inside the transaction that writes the events. The
/// payload stored is the exact body that will be signed and sent ([`delivery_payload`]). An
/// event without a user (a global rotation) goes to no webhook. The caller keeps `events`
/// within [`EVENTS_PER_STATEMENT`](crate::store::sql::EVENTS_PER_STATEMENT).
pub(in crate::store) async fn queue_webhook_deliveries<B: Backend>(
    tx: &mut Tx<B>,
    events: &[Event],
) -> Result<(), StoreError> {
    let queued: Vec<(Uuid, &Event)> = events
        .iter()
        .filter_map(|event| Some((event.user_id?, event)))
        .collect();
    if queued.is_empty() {
        return Ok(());
    }
    // The batch is bound as a VALUES list joined to the endpoints, rather than selected back
    // from `events`: the payload is serialized here, by the same serde_json as ever, because
    // receivers verify signatures over its exact text, and SQLite and PostgreSQL would each
    // render timestamps and JSON their own way. No casts: sqlx declares every parameter's type
    // to PostgreSQL (uuid, text, timestamptz), which the VALUES columns take, while on SQLite a
    // `CAST(.. AS uuid)` would mean numeric affinity and mangle the id's bytes.
    let mut query = QueryBuilder::<B>::new(
        "WITH queued (event_id, user_id, event_type, payload, occurred_at) AS (",
    );
    query.push_values(&queued, |mut row, (user_id, event)| {
        row.push_bind(event.id)
            .push_bind(*user_id)
            .push_bind(event.event_type.as_str())
            .push_bind(delivery_payload(event))
            .push_bind(event.occurred_at);
    });
    // The WHERE clause also keeps SQLite from reading `ON CONFLICT` as the join's constraint.
    query.push(
        ") INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, payload, status, \
         attempt_count, next_attempt_at, created_at) \
         SELECT w.id, q.event_id, q.event_type, q.payload, 'pending', 0, q.occurred_at, \
         q.occurred_at FROM queued q JOIN webhook_endpoints w ON w.user_id = q.user_id \
         WHERE w.disabled_at IS NULL \
         AND (w.event_types = '' OR w.event_types LIKE '%,' || q.event_type || ',%') \
         ON CONFLICT (endpoint_id, event_id) DO NOTHING",
    );
    query.build().execute(&mut **tx).await?;
    Ok(())
}

#[async_trait]
impl<B: Backend> WebhookStore for SqlStore<B> {
    async fn create_webhook_endpoint(
        &self,
        endpoint: &NewWebhookEndpoint,
        cap: u32,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // The user's row serializes concurrent registrations, so the count below holds.
        lock_user_in(&mut tx, endpoint.user_id).await?;
        let existing: i64 =
            query_scalar::<B, _>("SELECT COUNT(*) FROM webhook_endpoints WHERE user_id = $1")
                .bind(endpoint.user_id)
                .fetch_one(&mut *tx)
                .await?;
        if existing >= i64::from(cap) {
            return Ok(false);
        }
        query::<B>(
            "INSERT INTO webhook_endpoints (id, user_id, url, event_types, encrypted_secret, \
             secret_key_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
        )
        .bind(endpoint.id)
        .bind(endpoint.user_id)
        .bind(&endpoint.url)
        .bind(framed_types(&endpoint.event_types))
        .bind(&endpoint.encrypted_secret)
        .bind(&endpoint.secret_key_id)
        .bind(endpoint.created_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn webhook_endpoints(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<WebhookEndpointRecord>, StoreError> {
        let sql = format!("{SELECT_ENDPOINT} WHERE user_id = $1 ORDER BY created_at, id");
        let rows: Vec<EndpointRow> = query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn webhook_endpoint(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
    ) -> Result<Option<WebhookEndpointRecord>, StoreError> {
        let sql = format!("{SELECT_ENDPOINT} WHERE id = $1 AND user_id = $2");
        let row: Option<EndpointRow> = query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(endpoint_id)
            .bind(user_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn delete_webhook_endpoint(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
    ) -> Result<bool, StoreError> {
        // One statement: the deliveries and attempts go with it (ON DELETE CASCADE).
        let deleted = query::<B>("DELETE FROM webhook_endpoints WHERE id = $1 AND user_id = $2")
            .bind(endpoint_id)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(deleted.rows_affected() > 0)
    }

    async fn replace_webhook_secret(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
        encrypted_secret: &[u8],
        secret_key_id: &str,
        at: DateTime<Utc>,
        previous_until: DateTime<Utc>,
    ) -> Result<Option<WebhookEndpointRecord>, StoreError> {
        // The right-hand sides read the row as it was: the current secret moves aside.
        let sql = format!(
            "UPDATE webhook_endpoints SET previous_encrypted_secret = encrypted_secret, \
             previous_secret_key_id = secret_key_id, previous_secret_expires_at = $6, \
             encrypted_secret = $3, secret_key_id = $4, updated_at = $5 \
             WHERE id = $1 AND user_id = $2 RETURNING {ENDPOINT_COLUMNS}"
        );
        let row: Option<EndpointRow> = query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(endpoint_id)
            .bind(user_id)
            .bind(encrypted_secret)
            .bind(secret_key_id)
            .bind(at)
            .bind(previous_until)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn enable_webhook_endpoint(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
        at: DateTime<Utc>,
    ) -> Result<Option<WebhookEndpointRecord>, StoreError> {
        // The CASEs read the row as it was: only a disabled endpoint changes.
        let sql = format!(
            "UPDATE webhook_endpoints SET \
             failing_since = CASE WHEN disabled_at IS NULL THEN failing_since ELSE NULL END, \
             updated_at = CASE WHEN disabled_at IS NULL THEN updated_at ELSE $3 END, \
             disabled_at = NULL WHERE id = $1 AND user_id = $2 RETURNING {ENDPOINT_COLUMNS}"
        );
        let row: Option<EndpointRow> = query_as::<B, _>(sqlx::AssertSqlSafe(sql))
            .bind(endpoint_id)
            .bind(user_id)
            .bind(at)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Into::into))
    }

    async fn webhook_deliveries(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
        limit: u32,
    ) -> Result<Option<Vec<WebhookDeliveryRecord>>, StoreError> {
        // One read transaction, so the deliveries and their attempts agree.
        let mut tx = self.pool.begin().await?;
        let owned: i64 = query_scalar::<B, _>(
            "SELECT COUNT(*) FROM webhook_endpoints WHERE id = $1 AND user_id = $2",
        )
        .bind(endpoint_id)
        .bind(user_id)
        .fetch_one(&mut *tx)
        .await?;
        if owned == 0 {
            return Ok(None);
        }
        let deliveries: Vec<DeliveryRow> = query_as::<B, _>(
            "SELECT event_id, event_type, status, attempt_count, created_at, next_attempt_at, \
             delivered_at FROM webhook_deliveries WHERE endpoint_id = $1 \
             ORDER BY created_at DESC, event_id DESC LIMIT $2",
        )
        .bind(endpoint_id)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
        let mut attempts: Vec<AttemptRow> = Vec::new();
        if !deliveries.is_empty() {
            let mut query = QueryBuilder::<B>::new(
                "SELECT event_id, attempt, attempted_at, status_code, error FROM webhook_attempts \
                 WHERE endpoint_id = ",
            );
            query.push_bind(endpoint_id).push(" AND event_id IN (");
            let mut ids = query.separated(", ");
            for delivery in &deliveries {
                ids.push_bind(delivery.event_id);
            }
            query.push(") ORDER BY attempt");
            attempts = query.build_query_as().fetch_all(&mut *tx).await?;
        }
        tx.commit().await?;
        let records = deliveries
            .into_iter()
            .map(|row| {
                let status = DeliveryStatus::parse(&row.status).ok_or_else(|| {
                    StoreError::Other(format!("unknown delivery status {:?}", row.status))
                })?;
                Ok(WebhookDeliveryRecord {
                    attempts: attempts
                        .iter()
                        .filter(|attempt| attempt.event_id == row.event_id)
                        .map(|attempt| WebhookAttemptRecord {
                            attempt: attempt.attempt,
                            attempted_at: attempt.attempted_at,
                            status_code: attempt.status_code,
                            error: attempt.error.clone(),
                        })
                        .collect(),
                    event_id: row.event_id,
                    event_type: row.event_type,
                    status,
                    attempt_count: row.attempt_count,
                    created_at: row.created_at,
                    next_attempt_at: row.next_attempt_at,
                    delivered_at: row.delivered_at,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(Some(records))
    }

    async fn claim_webhook_deliveries(
        &self,
        claim: &DeliveryClaim,
    ) -> Result<Vec<ClaimedDelivery>, StoreError> {
        if claim.limit == 0 || claim.per_endpoint == 0 || claim.per_user == 0 {
            return Ok(Vec::new());
        }
        // A plain read first: an installation with nothing due (no endpoints, say) never takes
        // the write lock below. Deliveries of endpoints at their in-flight cap count as due,
        // so a claim may still come back empty while those are in flight.
        let due: Option<i32> = query_scalar::<B, _>(
            "SELECT 1 FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
             WHERE d.status = 'pending' AND d.next_attempt_at <= $1 \
             AND (d.lease_until IS NULL OR d.lease_until <= $2) AND w.disabled_at IS NULL \
             LIMIT 1",
        )
        .bind(claim.due_by)
        .bind(claim.now)
        .fetch_optional(&self.pool)
        .await?;
        if due.is_none() {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // One claimer at a time, whoever claims (the job, a pass woken by a commit, another
        // instance), so no delivery is sent twice while its lease holds and no endpoint gets
        // more than its share: on SQLite `BEGIN IMMEDIATE` takes the write lock before the
        // UPDATE reads; on PostgreSQL the advisory lock does, and the UPDATE (read committed:
        // a fresh snapshot per statement) then sees the leases the earlier claims committed.
        // The lease outlasts an attempt (`CLAIM_LEASE` in `webhooks/delivery.rs`), and
        // recording the attempt clears it; `tests/tests/webhooks.rs` races claims from two
        // pools.
        if B::NAME == "PostgreSQL" {
            query::<B>("SELECT pg_advisory_xact_lock($1)")
                .bind(CLAIM_LOCK)
                .execute(&mut *tx)
                .await?;
        }
        // Round-robin across users, then across each user's endpoints. `turn`: the place of a
        // delivery in its endpoint's queue; an endpoint's turns plus what it has leased
        // already stay within its cap. `user_turn`: the place of what is left in its user's
        // queue, every endpoint's first turn before any endpoint's second; a user's turns plus
        // what the user's endpoints have leased stay within the user's cap. Taking every
        // user's first turn before anyone's second is the fairness per user: one user's many
        // failing endpoints never hold more than the user's cap of the slots, and a user with
        // nothing in flight is served in the first claim that has a slot.
        let claimed: Vec<ClaimRow> = query_as::<B, _>(
            "WITH leased AS (SELECT d.endpoint_id, w.user_id, COUNT(*) AS in_flight \
                 FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
                 WHERE d.status = 'pending' AND d.lease_until > $1 \
                 GROUP BY d.endpoint_id, w.user_id), \
             user_leased AS (SELECT user_id, CAST(SUM(in_flight) AS BIGINT) AS in_flight \
                 FROM leased \
                 GROUP BY user_id), \
             queued AS (SELECT d.endpoint_id, w.user_id, d.event_id, d.next_attempt_at, \
                 ROW_NUMBER() OVER (PARTITION BY d.endpoint_id \
                     ORDER BY d.next_attempt_at, d.event_id) AS turn \
                 FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id \
                 WHERE d.status = 'pending' AND d.next_attempt_at <= $2 \
                 AND (d.lease_until IS NULL OR d.lease_until <= $1) AND w.disabled_at IS NULL), \
             allowed AS (SELECT q.endpoint_id, q.user_id, q.event_id, q.next_attempt_at, \
                 ROW_NUMBER() OVER (PARTITION BY q.user_id \
                     ORDER BY q.turn, q.next_attempt_at, q.endpoint_id) AS user_turn \
                 FROM queued q LEFT JOIN leased l ON l.endpoint_id = q.endpoint_id \
                 WHERE q.turn + COALESCE(l.in_flight, 0) <= $4), \
             picked AS (SELECT a.endpoint_id, a.event_id FROM allowed a \
                 LEFT JOIN user_leased u ON u.user_id = a.user_id \
                 WHERE a.user_turn + COALESCE(u.in_flight, 0) <= $6 \
                 ORDER BY a.user_turn, a.next_attempt_at, a.user_id LIMIT $5) \
             UPDATE webhook_deliveries SET lease_until = $3 \
             WHERE (endpoint_id, event_id) IN (SELECT endpoint_id, event_id FROM picked) \
             RETURNING endpoint_id, event_id, payload, attempt_count, created_at",
        )
        .bind(claim.now)
        .bind(claim.due_by)
        .bind(claim.lease_until)
        .bind(i64::from(claim.per_endpoint))
        .bind(i64::from(claim.limit))
        .bind(i64::from(claim.per_user))
        .fetch_all(&mut *tx)
        .await?;
        let mut deliveries = Vec::with_capacity(claimed.len());
        let mut endpoints: Vec<SendingRow> = Vec::new();
        for row in claimed {
            if !endpoints
                .iter()
                .any(|endpoint| endpoint.id == row.endpoint_id)
            {
                let endpoint: SendingRow = query_as::<B, _>(
                    "SELECT id, url, encrypted_secret, secret_key_id, previous_encrypted_secret, \
                     previous_secret_key_id, previous_secret_expires_at \
                     FROM webhook_endpoints WHERE id = $1",
                )
                .bind(row.endpoint_id)
                .fetch_one(&mut *tx)
                .await?;
                endpoints.push(endpoint);
            }
            let Some(endpoint) = endpoints.iter().find(|e| e.id == row.endpoint_id) else {
                continue;
            };
            let previous_secret = match (
                &endpoint.previous_encrypted_secret,
                &endpoint.previous_secret_key_id,
                endpoint.previous_secret_expires_at,
            ) {
                (Some(secret), Some(key_id), Some(until)) if until > claim.now => {
                    Some((secret.clone(), key_id.clone()))
                }
                _ => None,
            };
            deliveries.push(ClaimedDelivery {
                endpoint_id: row.endpoint_id,
                event_id: row.event_id,
                payload: row.payload,
                attempt_count: row.attempt_count,
                created_at: row.created_at,
                url: endpoint.url.clone(),
                encrypted_secret: endpoint.encrypted_secret.clone(),
                secret_key_id: endpoint.secret_key_id.clone(),
                previous_secret,
            });
        }
        tx.commit().await?;
        // Earliest queued first, so one endpoint tends to receive its events in the order
        // raised (two may be in flight at once).
        deliveries.sort_by_key(|delivery| (delivery.created_at, delivery.event_id));
        Ok(deliveries)
    }

    async fn record_webhook_attempts(
        &self,
        attempts: &[WebhookAttempt],
        disable_failing_since: DateTime<Utc>,
        raise: &RaiseEvents<'_, DisabledWebhook>,
        raised: &mut Vec<Event>,
    ) -> Result<(), StoreError> {
        if attempts.is_empty() {
            return Ok(());
        }
        // One transaction for what finished together: one commit (one fsync) for a batch.
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let mut events = Vec::new();
        for attempt in attempts {
            if record_attempt_in(&mut tx, attempt).await? {
                events.extend(
                    track_failures_in(&mut tx, attempt, disable_failing_since, raise).await?,
                );
            }
        }
        tx.commit().await?;
        raised.extend(events);
        Ok(())
    }

    async fn purge_webhook_deliveries_before(
        &self,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        // One statement: the attempts go with their deliveries (ON DELETE CASCADE).
        let deleted = query::<B>(
            "DELETE FROM webhook_deliveries WHERE status <> 'pending' AND created_at < $1",
        )
        .bind(cutoff)
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }
}

/// Keeps the failure streak of an attempt's endpoint, inside `tx`: a success ends it, a
/// failure starts it (if none runs). An endpoint failing again with a streak that started at
/// or before `disable_failing_since` is disabled, its pending deliveries given up: the events
/// `raise` returns for it, written here.
async fn track_failures_in<B: Backend>(
    tx: &mut Tx<B>,
    attempt: &WebhookAttempt,
    disable_failing_since: DateTime<Utc>,
    raise: &RaiseEvents<'_, DisabledWebhook>,
) -> Result<Vec<Event>, StoreError> {
    if attempt.next == NextDelivery::Delivered {
        query::<B>(
            "UPDATE webhook_endpoints SET failing_since = NULL \
             WHERE id = $1 AND failing_since IS NOT NULL",
        )
        .bind(attempt.endpoint_id)
        .execute(&mut **tx)
        .await?;
        return Ok(Vec::new());
    }
    query::<B>(
        "UPDATE webhook_endpoints SET failing_since = $2 WHERE id = $1 AND failing_since IS NULL",
    )
    .bind(attempt.endpoint_id)
    .bind(attempt.attempted_at)
    .execute(&mut **tx)
    .await?;
    let owner: Option<Uuid> = query_scalar::<B, _>(
        "UPDATE webhook_endpoints SET disabled_at = $2 \
         WHERE id = $1 AND disabled_at IS NULL AND failing_since <= $3 RETURNING user_id",
    )
    .bind(attempt.endpoint_id)
    .bind(attempt.attempted_at)
    .bind(disable_failing_since)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(user_id) = owner else {
        return Ok(Vec::new());
    };
    // Nothing more goes out while disabled: what was queued is given up (its attempts stay
    // listed), and enabling the endpoint starts over with the events raised from then on.
    query::<B>(
        "UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, \
         lease_until = NULL WHERE endpoint_id = $1 AND status = 'pending'",
    )
    .bind(attempt.endpoint_id)
    .execute(&mut **tx)
    .await?;
    let events = raise(&DisabledWebhook {
        user_id,
        endpoint_id: attempt.endpoint_id,
        at: attempt.attempted_at,
    });
    insert_events(tx, &events).await?;
    Ok(events)
}

/// Records one attempt and moves its delivery on, inside `tx`: whether it was recorded (its
/// delivery was still pending).
async fn record_attempt_in<B: Backend>(
    tx: &mut Tx<B>,
    attempt: &WebhookAttempt,
) -> Result<bool, StoreError> {
    let status = match attempt.next {
        NextDelivery::Delivered => DeliveryStatus::Delivered,
        NextDelivery::RetryAt(_) => DeliveryStatus::Pending,
        NextDelivery::GiveUp => DeliveryStatus::Failed,
    };
    let next_attempt_at = match attempt.next {
        NextDelivery::RetryAt(at) => Some(at),
        NextDelivery::Delivered | NextDelivery::GiveUp => None,
    };
    let delivered_at =
        matches!(attempt.next, NextDelivery::Delivered).then_some(attempt.attempted_at);
    let number: Option<i32> = query_scalar::<B, _>(
        "UPDATE webhook_deliveries SET attempt_count = attempt_count + 1, status = $3, \
         next_attempt_at = $4, delivered_at = $5, lease_until = NULL \
         WHERE endpoint_id = $1 AND event_id = $2 AND status = 'pending' \
         RETURNING attempt_count",
    )
    .bind(attempt.endpoint_id)
    .bind(attempt.event_id)
    .bind(status.as_str())
    .bind(next_attempt_at)
    .bind(delivered_at)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(number) = number else {
        // Deleted meanwhile (or already recorded by a claimer whose lease had lapsed, or given
        // up when its endpoint was disabled).
        return Ok(false);
    };
    query::<B>(
        "INSERT INTO webhook_attempts (endpoint_id, event_id, attempt, attempted_at, \
         status_code, error) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(attempt.endpoint_id)
    .bind(attempt.event_id)
    .bind(number)
    .bind(attempt.attempted_at)
    .bind(attempt.status_code.map(i32::from))
    .bind(attempt.error.as_deref())
    .execute(&mut **tx)
    .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_are_framed_for_one_like() {
        assert_eq!(framed_types(&[]), "");
        let names = vec!["session.revoked".to_owned(), "import.completed".to_owned()];
        let framed = framed_types(&names);
        assert_eq!(framed, ",session.revoked,import.completed,");
        assert_eq!(unframed_types(&framed), names);
        assert!(unframed_types("").is_empty());
    }
}
