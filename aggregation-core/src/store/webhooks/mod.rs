//! Webhook endpoints, their pending deliveries and the record of every delivery attempt.
//!
//! Deliveries are written by the event outbox itself (in the transaction that writes the
//! event, one per matching endpoint), so an event is queued for a webhook exactly when it was
//! committed. Delivery (right after the commit, and the `deliver_webhooks` job for retries)
//! claims due deliveries with a lease, sends them, and records each attempt with
//! [`WebhookStore::record_webhook_attempts`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreError;
use crate::enums::string_enum;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// A webhook endpoint to create.
#[derive(Debug, Clone)]
pub struct NewWebhookEndpoint {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// Where deliveries are POSTed (absolute http(s) URL, vetted at registration).
    pub url: String,
    /// The event type names it receives; empty for every type.
    pub event_types: Vec<String>,
    /// Nonce and ciphertext of the signing secret (bound to the endpoint id).
    pub encrypted_secret: Vec<u8>,
    /// The key that encrypted the secret.
    pub secret_key_id: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// A stored webhook endpoint.
#[derive(Debug, Clone)]
pub struct WebhookEndpointRecord {
    /// Id.
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// Where deliveries are POSTed.
    pub url: String,
    /// The event type names it receives; empty for every type.
    pub event_types: Vec<String>,
    /// Nonce and ciphertext of the signing secret (bound to the endpoint id).
    pub encrypted_secret: Vec<u8>,
    /// The key that encrypted the secret.
    pub secret_key_id: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change (creation, secret rotation, or enabling).
    pub updated_at: DateTime<Utc>,
    /// When it was disabled for failing too long; `None` while enabled.
    pub disabled_at: Option<DateTime<Utc>>,
    /// When the secret it had before its last rotation stops signing beside the current one.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
}

string_enum! {
    /// Where a delivery stands.
    DeliveryStatus {
        /// Waiting for its first or next attempt.
        Pending => "pending",
        /// A 2xx answer was received.
        Delivered => "delivered",
        /// Given up: still failing when it reached the maximum age.
        Failed => "failed",
    }
}

/// One event queued for one endpoint.
#[derive(Debug, Clone)]
pub struct WebhookDeliveryRecord {
    /// The event (also the `webhook-id` of every attempt).
    pub event_id: Uuid,
    /// The event's type name.
    pub event_type: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempt_count: i32,
    /// When it was queued.
    pub created_at: DateTime<Utc>,
    /// When the next attempt is due (`None` once delivered or given up).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When a 2xx answer was received.
    pub delivered_at: Option<DateTime<Utc>>,
    /// Its attempts, oldest first.
    pub attempts: Vec<WebhookAttemptRecord>,
}

/// One attempt to deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookAttemptRecord {
    /// 1 for the first attempt.
    pub attempt: i32,
    /// When the request was sent.
    pub attempted_at: DateTime<Utc>,
    /// The answer's status code; `None` when no answer came (refused address, timeout,
    /// connection failure).
    pub status_code: Option<i32>,
    /// Why the attempt did not deliver: a coarse code (see [`WebhookAttempt::error`]).
    pub error: Option<String>,
}

/// A delivery claimed by the delivery job, with what sending it needs.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    /// The endpoint.
    pub endpoint_id: Uuid,
    /// The event, the `webhook-id`.
    pub event_id: Uuid,
    /// The exact body to send (`{"id","type","occurred_at","data"}`), signed as is.
    pub payload: String,
    /// Attempts made before this one.
    pub attempt_count: i32,
    /// When it was queued (its age decides when retrying stops).
    pub created_at: DateTime<Utc>,
    /// The endpoint's URL.
    pub url: String,
    /// The endpoint's encrypted signing secret.
    pub encrypted_secret: Vec<u8>,
    /// The key that encrypted it.
    pub secret_key_id: String,
    /// The secret before the last rotation, while it still signs: its ciphertext and the key
    /// that encrypted it.
    pub previous_secret: Option<(Vec<u8>, String)>,
}

/// What a claim of deliveries may take.
#[derive(Debug, Clone, Copy)]
pub struct DeliveryClaim {
    /// The time of the claim: leases that end at or before it are free.
    pub now: DateTime<Utc>,
    /// Only deliveries due at or before this time are claimed (a pass attempts each delivery
    /// at most once by keeping it fixed: a retry is due after the attempt).
    pub due_by: DateTime<Utc>,
    /// Until when the claimed deliveries are leased.
    pub lease_until: DateTime<Utc>,
    /// Most deliveries claimed.
    pub limit: u32,
    /// Most deliveries of one endpoint leased at once, counting those leased before.
    pub per_endpoint: u32,
    /// Most deliveries of one user's endpoints together leased at once, counting those
    /// leased before: one user's many slow endpoints hold at most this many sending slots.
    pub per_user: u32,
}

/// What follows an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextDelivery {
    /// Delivered (a 2xx answer): no more attempts.
    Delivered,
    /// Try again at this time.
    RetryAt(DateTime<Utc>),
    /// Give up: the delivery reached its maximum age.
    GiveUp,
}

/// An endpoint [`WebhookStore::record_webhook_attempts`] disabled: what its events are raised
/// from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisabledWebhook {
    /// The endpoint's user.
    pub user_id: Uuid,
    /// The endpoint.
    pub endpoint_id: Uuid,
    /// The attempt that disabled it.
    pub at: DateTime<Utc>,
}

/// The result of one attempt, to record.
#[derive(Debug, Clone)]
pub struct WebhookAttempt {
    /// The endpoint.
    pub endpoint_id: Uuid,
    /// The event.
    pub event_id: Uuid,
    /// When the request was sent.
    pub attempted_at: DateTime<Utc>,
    /// The answer's status code, if one came.
    pub status_code: Option<u16>,
    /// Why it did not deliver: a coarse code (`connect_failed`, `timeout`, `request_failed`,
    /// `http_status`, `internal_error`), never a resolver or system message.
    pub error: Option<String>,
    /// What follows.
    pub next: NextDelivery,
}

/// Webhook endpoints and their deliveries.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Creates an endpoint unless the user already has `cap` of them; `false` (nothing
    /// written) when capped. Atomic per user: concurrent calls never exceed the cap.
    async fn create_webhook_endpoint(
        &self,
        endpoint: &NewWebhookEndpoint,
        cap: u32,
    ) -> Result<bool, StoreError>;

    /// The user's endpoints, oldest first.
    async fn webhook_endpoints(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<WebhookEndpointRecord>, StoreError>;

    /// One endpoint of the user; `None` when unknown or another user's.
    async fn webhook_endpoint(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
    ) -> Result<Option<WebhookEndpointRecord>, StoreError>;

    /// Deletes an endpoint of the user with its deliveries and attempts, atomically; `false`
    /// when unknown or another user's. Nothing more is sent to it, even a delivery claimed
    /// before (its attempt finds nothing to record).
    async fn delete_webhook_endpoint(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
    ) -> Result<bool, StoreError>;

    /// Replaces the signing secret of an endpoint of the user; `None` when unknown or another
    /// user's, else the updated endpoint. The secret it replaces keeps signing beside the new
    /// one until `previous_until` (a secret replaced earlier stops at once).
    async fn replace_webhook_secret(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
        encrypted_secret: &[u8],
        secret_key_id: &str,
        at: DateTime<Utc>,
        previous_until: DateTime<Utc>,
    ) -> Result<Option<WebhookEndpointRecord>, StoreError>;

    /// The latest `limit` deliveries of an endpoint of the user, newest first, each with its
    /// attempts; `None` when the endpoint is unknown or another user's.
    async fn webhook_deliveries(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
        limit: u32,
    ) -> Result<Option<Vec<WebhookDeliveryRecord>>, StoreError>;

    /// Enables an endpoint of the user again (a disabled one starts over: its failures are
    /// forgotten); `None` when unknown or another user's, else the endpoint. Enabling an
    /// enabled endpoint changes nothing.
    async fn enable_webhook_endpoint(
        &self,
        user_id: Uuid,
        endpoint_id: Uuid,
        at: DateTime<Utc>,
    ) -> Result<Option<WebhookEndpointRecord>, StoreError>;

    /// Claims pending deliveries of enabled endpoints, due by `claim.due_by`, whose lease is
    /// free at `claim.now`, leasing them until `claim.lease_until`: at most `claim.limit`,
    /// and at most `claim.per_endpoint` leased at once per endpoint (those leased earlier by
    /// anyone count). Round-robin across endpoints: every endpoint's earliest due delivery
    /// comes before any endpoint's second. Of concurrent callers each delivery goes to at
    /// most one until its lease lapses (a claimer that died leaves it to the next).
    ///
    /// First a plain read of whether anything is due: when nothing is, no write transaction
    /// (on SQLite, no write lock) is taken.
    async fn claim_webhook_deliveries(
        &self,
        claim: &DeliveryClaim,
    ) -> Result<Vec<ClaimedDelivery>, StoreError>;

    /// Records attempts and moves each delivery on (delivered, due again, or given up),
    /// releasing its lease, all in one transaction. An attempt whose delivery no longer exists
    /// (its endpoint was deleted meanwhile) or is no longer pending is skipped.
    ///
    /// A success clears the endpoint's failure streak; a failure starts one if none is
    /// running. An endpoint whose streak started at or before `disable_failing_since` and
    /// that failed again is disabled, its pending deliveries given up, and `raise` called for
    /// it in the same transaction, the events it returns written there and appended to
    /// `raised` once committed, to publish after the call.
    async fn record_webhook_attempts(
        &self,
        attempts: &[WebhookAttempt],
        disable_failing_since: DateTime<Utc>,
        raise: &crate::events::RaiseEvents<'_, DisabledWebhook>,
        raised: &mut Vec<crate::events::Event>,
    ) -> Result<(), StoreError>;

    /// Deletes delivered and given-up deliveries queued before `cutoff`, with their attempts,
    /// atomically; how many deliveries. Pending ones stay whatever their age.
    async fn purge_webhook_deliveries_before(
        &self,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError>;
}
