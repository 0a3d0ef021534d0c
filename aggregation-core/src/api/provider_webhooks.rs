//! Inbound provider webhooks: `POST /api/v1/provider-webhooks/{slug}`, public, for the
//! providers that opt in ([`Provider::receives_webhooks`](crate::providers::Provider::receives_webhooks);
//! any other slug is 404). The provider verifies each request (Plaid: the `Plaid-Verification`
//! ES256 JWT over the raw body); an unverified one is 401 and nothing is done. A verified one
//! is answered 200 at once, and what it asks for (a sync, an expiry, an event) runs in the
//! background. The body is read up to [`MAX_WEBHOOK_BODY`] bytes (413 beyond); the endpoint
//! has its own per-IP rate limit.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::StatusCode;
use http::request::Parts;
use serde::Serialize;

use super::extract::{PathSlug, read_body};
use super::handler::{FromRequest, ViaBody};
use super::openapi::{DescribeArg, OperationDoc};
use super::routes::{Route, limited, route};
use super::{ApiResult, RequestBody, json};
use crate::app::App;
use crate::problem::{ApiError, ErrorCode};
use crate::rate_limit::policy::PROVIDER_WEBHOOK;

pub(crate) const ROUTES: &[Route] = &[route!(
    POST "/api/v1/provider-webhooks/{slug}" => receive, limited(PROVIDER_WEBHOOK),
    "Receive a provider's webhook (Plaid), verified by the provider's signature",
    [200: WebhookReceived; NotFound, Unauthorized, PayloadTooLarge]
)];

/// Largest webhook body read.
pub(crate) const MAX_WEBHOOK_BODY: usize = 64 * 1024;

/// The raw body and headers of a webhook: what a signature covers.
pub(crate) struct WebhookBody {
    headers: BTreeMap<String, String>,
    body: Bytes,
}

impl FromRequest<ViaBody> for WebhookBody {
    type Read = Bytes;

    async fn read(body: RequestBody, parts: &Parts, _: &App) -> Result<Bytes, ApiError> {
        read_body(&parts.headers, body, MAX_WEBHOOK_BODY).await
    }

    async fn from_read(body: Bytes, parts: &Parts, _: &App) -> Result<Self, ApiError> {
        let headers = parts
            .headers
            .iter()
            .filter_map(|(name, value)| {
                value
                    .to_str()
                    .ok()
                    .map(|value| (name.as_str().to_ascii_lowercase(), value.to_owned()))
            })
            .collect();
        Ok(Self { headers, body })
    }
}

/// What a provider webhook body looks like to the documentation: the provider's JSON (Plaid:
/// `webhook_type`, `webhook_code`, `item_id`, `error`).
#[derive(Serialize, utoipa::ToSchema)]
struct ProviderWebhookPayload {
    /// The kind of webhook (`TRANSACTIONS`, `ITEM`).
    webhook_type: Option<String>,
    /// What happened (`SYNC_UPDATES_AVAILABLE`, `ERROR`, `PENDING_EXPIRATION`).
    webhook_code: Option<String>,
    /// The item (connection) concerned.
    item_id: Option<String>,
}

impl DescribeArg for WebhookBody {
    fn describe(doc: &mut OperationDoc) {
        doc.optional_header(
            "Plaid-Verification",
            "Plaid's ES256 JWT over the body (`request_body_sha256`); a request without a valid one is 401.",
            super::openapi::schemas::text(1, 4096, false),
        );
        doc.json_body::<ProviderWebhookPayload>(false);
        doc.error(ErrorCode::PayloadTooLarge);
        doc.error(ErrorCode::Unauthorized);
    }
}

/// The answer to a verified webhook.
#[derive(Serialize, utoipa::ToSchema)]
struct WebhookReceived {
    /// Always `true`: the webhook was verified and what it asks for was started.
    received: bool,
}

/// `POST /api/v1/provider-webhooks/{slug}`
async fn receive(state: &App, PathSlug(slug): PathSlug, webhook: WebhookBody) -> ApiResult {
    state
        .connections
        .receive_webhook(&slug, &webhook.headers, &webhook.body)
        .await?;
    json(StatusCode::OK, &WebhookReceived { received: true })
}
