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
pub use aggregation_core::{
    AggregationService, AggregationServiceBuilder, Config, Mount, PeerAddr,
};

/// The request body [`router`] hands to the service: axum's own.
pub type RequestBody = axum::body::Body;

const API_PREFIX: &str = Mount::API_PREFIX;

/// An axum [`Router`] that serves the API under `/api/v1`: [`router_with`] and [`Mount::api`].
///
/// `service` is an [`AggregationService`], possibly wrapped in tower layers. Merge the router
/// into your app; your routes and your fallback answer every other path. Serve with
/// `into_make_service_with_connect_info::<SocketAddr>()` so the core sees each client's
/// address (as a [`PeerAddr`] request extension): without it every client shares one
/// rate-limit bucket (the core warns once, at the first request without it).
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
    router_with(service, Mount::api())
}

/// An axum [`Router`] that hands the paths `mount` names to `service`, with their full path
/// (the service routes on `/api/v1/...`, so nothing is stripped).
///
/// ```
/// # fn demo(service: aggregation_core::AggregationService) -> axum::Router {
/// use aggregation_axum::{Mount, router_with};
///
/// axum::Router::new()
///     .route("/", axum::routing::get(|| async { "my app" }))
///     .merge(router_with(service, Mount::api().with_health()))
///     .fallback(|| async { (http::StatusCode::NOT_FOUND, "not here") })
/// # }
/// ```
pub fn router_with<S, B>(service: S, mount: Mount) -> Router
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
    let service = tower::ServiceBuilder::new()
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
        .service(service);
    // `route_service` keeps the request's path; `nest_service` would strip the prefix. A
    // wildcard needs at least one character, hence the trailing-slash route.
    let mut router = Router::new()
        .route_service(API_PREFIX, service.clone())
        .route_service(&format!("{API_PREFIX}/"), service.clone())
        .route_service(&format!("{API_PREFIX}/{{*path}}"), service.clone());
    if mount.health() {
        for path in Mount::HEALTH_PATHS {
            router = router.route_service(path, service.clone());
        }
    }
    if mount.fallback() {
        router = router.fallback_service(service);
    }
    router
}
