#![doc = include_str!("../README.md")]

use std::convert::Infallible;
use std::error::Error as StdError;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use bytes::Bytes;
use http_body::Body;
use tower::Service;

#[doc(no_inline)]
pub use aggregation_core::{AggregationService, AggregationServiceBuilder, Config, PeerAddr};

/// The request body [`router`] hands to the service: axum's own.
pub type RequestBody = axum::body::Body;

/// An axum [`Router`] that serves the whole API (every path under `/api/v1`, and `/health`).
///
/// `service` is an [`AggregationService`], possibly wrapped in tower layers. Merge the router
/// into your app, or nest it. Serve with `into_make_service_with_connect_info::<SocketAddr>()`
/// so the core sees each client's address (as a [`PeerAddr`] request extension).
pub fn router<S, B>(service: S) -> Router
where
    S: Service<http::Request<RequestBody>, Response = http::Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
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
