//! The router beside a host app's own routes and fallback: which paths reach the service.

use std::convert::Infallible;
use std::net::SocketAddr;

use aggregation_axum::{Mount, PeerAddr, RequestBody, router, router_with};
use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use tower::{ServiceExt, service_fn};

/// Stands in for the core: names the full path (and query) and peer it was handed.
fn echo() -> impl tower::Service<
    Request<RequestBody>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send
+ Sync {
    service_fn(|request: Request<RequestBody>| async move {
        let peer = request
            .extensions()
            .get::<PeerAddr>()
            .map_or_else(|| "no peer".to_owned(), |PeerAddr(peer)| peer.to_string());
        Ok(Response::new(Body::from(format!(
            "service {} from {peer}",
            request.uri()
        ))))
    })
}

/// A host app: its own home page and fallback, with the aggregation router merged in.
fn host(mount: Mount) -> Router {
    Router::new()
        .route("/", get(|| async { "host home" }))
        .merge(router_with(echo(), mount))
        .fallback(|| async { (StatusCode::NOT_FOUND, "host fallback") })
}

async fn get_text(app: &Router, path: &str) -> (StatusCode, String) {
    let request = Request::get(path)
        .body(Body::empty())
        .unwrap_or_else(|error| panic!("request {path}: {error}"));
    let Ok(response) = app.clone().oneshot(request).await;
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1024)
        .await
        .unwrap_or_else(|error| panic!("body of {path}: {error}"));
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn api_paths_reach_the_service_and_the_host_keeps_the_rest() {
    let app = host(Mount::api());
    for path in [
        "/api/v1",
        "/api/v1/",
        "/api/v1/sessions",
        "/api/v1/accounts/x/y/z?page=2",
    ] {
        assert_eq!(
            get_text(&app, path).await,
            (StatusCode::OK, format!("service {path} from no peer")),
            "{path}"
        );
    }
    assert_eq!(
        get_text(&app, "/").await,
        (StatusCode::OK, "host home".to_owned())
    );
    for path in ["/nope", "/health", "/api/v2/sessions", "/api/v1x", "/api"] {
        assert_eq!(
            get_text(&app, path).await,
            (StatusCode::NOT_FOUND, "host fallback".to_owned()),
            "{path}"
        );
    }
}

#[tokio::test]
async fn health_is_mounted_only_when_asked() {
    let app = host(Mount::api().with_health());
    assert_eq!(
        get_text(&app, "/health").await,
        (StatusCode::OK, "service /health from no peer".to_owned())
    );
    for path in ["/health/live", "/health/ready"] {
        assert_eq!(
            get_text(&app, path).await,
            (StatusCode::OK, format!("service {path} from no peer")),
            "{path}"
        );
    }
    for path in ["/healthz", "/health/other"] {
        assert_eq!(
            get_text(&app, path).await,
            (StatusCode::NOT_FOUND, "host fallback".to_owned()),
            "{path}"
        );
    }
    let without = host(Mount::api());
    for path in ["/health/live", "/health/ready"] {
        assert_eq!(
            get_text(&without, path).await,
            (StatusCode::NOT_FOUND, "host fallback".to_owned()),
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_fallback_mount_answers_every_unrouted_path() {
    let app = Router::new()
        .route("/", get(|| async { "host home" }))
        .merge(router_with(echo(), Mount::api().with_fallback()));
    assert_eq!(
        get_text(&app, "/").await,
        (StatusCode::OK, "host home".to_owned())
    );
    for path in ["/nope", "/health", "/api/v2/sessions"] {
        assert_eq!(
            get_text(&app, path).await,
            (StatusCode::OK, format!("service {path} from no peer")),
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_connect_info_address_reaches_the_service_as_peer_addr() {
    let app = Router::new().merge(router(echo()));
    let peer = SocketAddr::from(([192, 0, 2, 7], 4711));
    let mut request = Request::get("/api/v1/sessions")
        .body(Body::empty())
        .unwrap_or_else(|error| panic!("request: {error}"));
    request.extensions_mut().insert(ConnectInfo(peer));
    let Ok(response) = app.oneshot(request).await;
    let body = axum::body::to_bytes(response.into_body(), 1024)
        .await
        .unwrap_or_else(|error| panic!("body: {error}"));
    assert_eq!(body, "service /api/v1/sessions from 192.0.2.7:4711");
}
