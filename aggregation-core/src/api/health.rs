//! Health checks for load balancers and orchestrators, never rate limited:
//!
//! - `GET /health`: 200 while the store answers (kept as it always was);
//! - `GET /health/live`: 200 while the process serves requests at all; asks nothing else, so
//!   a store outage never gets a healthy instance restarted;
//! - `GET /health/ready`: 200 while the store and the rate-limit store (Redis, when that is
//!   the store) answer; otherwise 503 `service_unavailable`, so traffic goes elsewhere until
//!   they answer again. Which dependency failed is logged, not answered.

use http::StatusCode;
use serde::Serialize;

use super::routes::{Route, UNLIMITED, route};
use super::{ApiResult, json};
use crate::app::App;
use crate::problem::{ApiError, ErrorCode};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/health" => health, UNLIMITED, "Whether the service and its store answer", [200: Health]),
    route!(GET "/health/live" => live, UNLIMITED,
        "Whether the process serves requests (asks no dependency)", [200: Health]),
    route!(GET "/health/ready" => ready, UNLIMITED,
        "Whether the store and the rate-limit store answer, i.e. the instance can take traffic",
        [200: Health]),
];

#[derive(Serialize, utoipa::ToSchema)]
struct Health {
    status: &'static str,
}

const HEALTHY: Health = Health { status: "ok" };

/// `GET /health`
async fn health(state: &App) -> ApiResult {
    state.store.ping().await?;
    json(StatusCode::OK, &HEALTHY)
}

/// `GET /health/live`
async fn live(_state: &App) -> ApiResult {
    json(StatusCode::OK, &HEALTHY)
}

fn not_ready() -> ApiError {
    ApiError::new(
        ErrorCode::ServiceUnavailable,
        "The service is not ready to take requests. Try again shortly.",
    )
    .with_header(
        http::header::RETRY_AFTER,
        http::HeaderValue::from(super::STORE_RETRY_AFTER_SECONDS),
    )
}

/// `GET /health/ready`
async fn ready(state: &App) -> ApiResult {
    // Both at once: a slow store and a slow Redis cost the longer of their timeouts, not the sum.
    let (store, limits) = tokio::join!(state.store.ping(), state.limits.ping());
    if let Err(error) = store {
        // The outage itself is logged once by the store's guard, not per check.
        tracing::debug!(error = %error, "not ready: the store does not answer");
        return Err(not_ready());
    }
    if let Err(error) = limits {
        tracing::debug!(error = %error, "not ready: the rate-limit store does not answer");
        return Err(not_ready());
    }
    json(StatusCode::OK, &HEALTHY)
}
