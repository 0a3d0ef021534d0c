#![doc = include_str!("../README.md")]

use std::net::SocketAddr;

use aggregation_core::{AggregationService, PeerAddr};
use axum::Router;
use axum::extract::{ConnectInfo, Request};

/// An axum [`Router`] that serves the whole API (every path under `/api/v1`, and `/health`).
///
/// Merge it into your app, or nest it. Serve with
/// `into_make_service_with_connect_info::<SocketAddr>()` so the core sees each client's address.
pub fn router(service: AggregationService) -> Router {
    Router::new().fallback_service(
        tower::ServiceBuilder::new()
            .map_request(|mut request: Request| {
                let peer = request
                    .extensions()
                    .get::<ConnectInfo<SocketAddr>>()
                    .map(|ConnectInfo(address)| PeerAddr(*address));
                if let Some(peer) = peer {
                    request.extensions_mut().insert(peer);
                }
                request
            })
            .service(service),
    )
}
