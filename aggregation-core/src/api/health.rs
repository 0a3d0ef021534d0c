//! The health check, for load balancers: 200 while the store answers, never rate limited.

use http::StatusCode;
use serde::Serialize;

use super::routes::{Route, UNLIMITED, route};
use super::{ApiResult, json};
use crate::app::App;

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/health" => health, UNLIMITED, "Whether the service and its store answer", [200: Health]),
];

#[derive(Serialize, utoipa::ToSchema)]
struct Health {
    status: &'static str,
}

/// `GET /health`
async fn health(state: &App) -> ApiResult {
    state.store.ping().await?;
    json(StatusCode::OK, &Health { status: "ok" })
}
