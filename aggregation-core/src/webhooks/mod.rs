//! Webhooks following the [Standard Webhooks](https://www.standardwebhooks.com/)
//! specification: a user registers endpoints, and every durable event of that user
//! ([`crate::events::Event`]) whose type an endpoint receives is POSTed to it, signed.
//!
//! - Body: `{"id", "type", "occurred_at", "data"}`, the event as the outbox stored it.
//! - Headers: `webhook-id` (the event id, the same on every retry: receivers deduplicate on
//!   it), `webhook-timestamp` (Unix seconds of the attempt) and `webhook-signature`
//!   (`v1,` and the base64 HMAC-SHA256 of `"{id}.{timestamp}.{body}"` keyed with the
//!   endpoint's secret, handed out once as `whsec_<base64>` and stored only encrypted with
//!   the service's [`Keyring`](crate::Keyring)). For 24 h after a rotation the replaced
//!   secret signs too: the header then carries both signatures, space-separated.
//! - Delivery: the outbox queues one delivery per matching endpoint in the transaction that
//!   writes the event. Sending starts right after the commit: the running jobs
//!   ([`JobRunner::spawn`](crate::jobs::JobRunner::spawn)) hear the event on the service's
//!   event bus and run a delivery pass (`wake.rs`); the `deliver_webhooks` job
//!   ([`crate::jobs`]) runs the same pass on its schedule for retries and for events raised
//!   elsewhere. Every pass claims due deliveries with a per-row lease and sends them. A 2xx
//!   answer delivers; anything else is retried with exponential backoff
//!   ([`Config::with_webhook_retry_delays`]) until the delivery is
//!   [`Config::webhook_max_age`] old. At least once: a receiver may see an event twice.
//! - Fairness: claims take every endpoint's earliest due delivery before anyone's second, and
//!   at most 2 deliveries of one endpoint are in flight at once, so a slow endpoint holds at
//!   most 2 of the sending slots while the others' deliveries go out.
//! - An endpoint that failed every attempt for [`Config::webhook_disable_after`] (24 h) is
//!   disabled: a `webhook.disabled` event goes to its owner, its queued deliveries are given
//!   up, and nothing is queued for it until `PATCH /api/v1/webhooks/{id}` enables it.
//! - Only public addresses are reached unless the host allows private ones (`outbound/ssrf.rs`).

#[cfg(feature = "webhooks")]
pub(crate) mod delivery;
pub(crate) mod signing;
#[cfg(feature = "webhooks")]
pub(crate) mod wake;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::config::Config;
use crate::crypto::CryptoError;
use crate::store::{
    NewWebhookEndpoint, Store, StoreError, WebhookDeliveryRecord, WebhookEndpointRecord, now,
};
use signing::SigningSecret;

/// Most endpoints one user may register.
pub(crate) const MAX_ENDPOINTS_PER_USER: u32 = 10;
/// Most deliveries `GET /webhooks/{id}/deliveries` lists (the newest).
pub(crate) const LISTED_DELIVERIES: u32 = 50;
/// How long a rotated-away secret keeps signing beside the new one, so receivers can switch
/// without losing deliveries.
pub(crate) const PREVIOUS_SECRET_SIGNS_FOR: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// The rule of an endpoint's disabling: its `webhook.disabled` event, as of the attempt
/// that disabled it.
// Outside delivery, so the store cases apply it in builds without the `webhooks` feature.
#[cfg(any(
    feature = "webhooks",
    all(test, any(feature = "sqlite", feature = "postgres"))
))]
pub(crate) fn webhook_disabled_events(
    disabled: &crate::store::DisabledWebhook,
) -> Vec<crate::events::Event> {
    use crate::events::DurableEvent as _;
    let event = crate::events::WebhookDisabled {
        user_id: disabled.user_id,
        webhook_id: disabled.endpoint_id,
    };
    vec![event.event_at(disabled.at)]
}

/// Why a webhook operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebhookError {
    /// No endpoint of the user has this id.
    #[error("Webhook not found.")]
    NotFound,
    /// The user has as many endpoints as allowed.
    #[error("A user may register at most {MAX_ENDPOINTS_PER_USER} webhooks; delete one first.")]
    TooMany,
    /// The secret could not be encrypted (no key configured, say).
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An endpoint with the secret handed out once (at registration or rotation).
pub(crate) struct WithSecret {
    /// The endpoint.
    pub(crate) endpoint: WebhookEndpointRecord,
    /// `whsec_<base64>`.
    pub(crate) secret: String,
}

/// The webhook use cases over a store.
#[derive(Clone)]
pub(crate) struct Webhooks {
    store: Arc<dyn Store>,
    config: Arc<Config>,
}

/// Encrypts a secret for storage, bound to its endpoint.
fn seal(
    config: &Config,
    endpoint_id: Uuid,
    secret: &SigningSecret,
) -> Result<(Vec<u8>, String), CryptoError> {
    let (key_id, ciphertext) = config
        .keyring()
        .encrypt(secret.as_bytes(), endpoint_id.as_bytes())?;
    Ok((ciphertext, key_id))
}

/// Decrypts a stored secret of an endpoint.
#[cfg(feature = "webhooks")]
pub(crate) fn open_secret(
    config: &Config,
    endpoint_id: Uuid,
    key_id: &str,
    ciphertext: &[u8],
) -> Result<SigningSecret, CryptoError> {
    config
        .keyring()
        .decrypt(key_id, ciphertext, endpoint_id.as_bytes())
        .map(SigningSecret::from_bytes)
}

impl Webhooks {
    pub(crate) fn new(store: Arc<dyn Store>, config: Arc<Config>) -> Self {
        Self { store, config }
    }

    /// Registers an endpoint (its URL already checked) receiving `event_types` (empty: all).
    pub(crate) async fn register(
        &self,
        user_id: Uuid,
        url: String,
        event_types: Vec<String>,
    ) -> Result<WithSecret, WebhookError> {
        let id = Uuid::now_v7();
        let secret = SigningSecret::generate();
        let (encrypted_secret, secret_key_id) = seal(&self.config, id, &secret)?;
        let at = now();
        let endpoint = NewWebhookEndpoint {
            id,
            user_id,
            url,
            event_types,
            encrypted_secret,
            secret_key_id,
            created_at: at,
        };
        if !self
            .store
            .create_webhook_endpoint(&endpoint, MAX_ENDPOINTS_PER_USER)
            .await?
        {
            return Err(WebhookError::TooMany);
        }
        Ok(WithSecret {
            endpoint: WebhookEndpointRecord {
                id,
                user_id,
                url: endpoint.url,
                event_types: endpoint.event_types,
                encrypted_secret: endpoint.encrypted_secret,
                secret_key_id: endpoint.secret_key_id,
                created_at: at,
                updated_at: at,
                disabled_at: None,
                previous_secret_expires_at: None,
            },
            secret: secret.to_whsec(),
        })
    }

    /// The user's endpoints, oldest first.
    pub(crate) async fn list(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<WebhookEndpointRecord>, WebhookError> {
        Ok(self.store.webhook_endpoints(user_id).await?)
    }

    /// One of the user's endpoints.
    pub(crate) async fn get(
        &self,
        user_id: Uuid,
        id: Uuid,
    ) -> Result<WebhookEndpointRecord, WebhookError> {
        self.store
            .webhook_endpoint(user_id, id)
            .await?
            .ok_or(WebhookError::NotFound)
    }

    /// Deletes one of the user's endpoints; nothing more is sent to it.
    pub(crate) async fn delete(&self, user_id: Uuid, id: Uuid) -> Result<(), WebhookError> {
        if self.store.delete_webhook_endpoint(user_id, id).await? {
            Ok(())
        } else {
            Err(WebhookError::NotFound)
        }
    }

    /// Enables one of the user's endpoints again (after it was disabled for failing); the
    /// endpoint.
    pub(crate) async fn enable(
        &self,
        user_id: Uuid,
        id: Uuid,
    ) -> Result<WebhookEndpointRecord, WebhookError> {
        self.store
            .enable_webhook_endpoint(user_id, id, now())
            .await?
            .ok_or(WebhookError::NotFound)
    }

    /// Replaces the secret of one of the user's endpoints; every later attempt (retries of
    /// earlier events included) is signed with the new one, and for
    /// [`PREVIOUS_SECRET_SIGNS_FOR`] with the replaced one beside it.
    pub(crate) async fn rotate_secret(
        &self,
        user_id: Uuid,
        id: Uuid,
    ) -> Result<(WithSecret, DateTime<Utc>), WebhookError> {
        let secret = SigningSecret::generate();
        let (encrypted_secret, key_id) = seal(&self.config, id, &secret)?;
        let at = now();
        let endpoint = self
            .store
            .replace_webhook_secret(
                user_id,
                id,
                &encrypted_secret,
                &key_id,
                at,
                crate::dates::later(at, PREVIOUS_SECRET_SIGNS_FOR),
            )
            .await?
            .ok_or(WebhookError::NotFound)?;
        Ok((
            WithSecret {
                endpoint,
                secret: secret.to_whsec(),
            },
            at,
        ))
    }

    /// The newest deliveries of one of the user's endpoints with their attempts.
    pub(crate) async fn deliveries(
        &self,
        user_id: Uuid,
        id: Uuid,
    ) -> Result<Vec<WebhookDeliveryRecord>, WebhookError> {
        self.store
            .webhook_deliveries(user_id, id, LISTED_DELIVERIES)
            .await?
            .ok_or(WebhookError::NotFound)
    }
}
