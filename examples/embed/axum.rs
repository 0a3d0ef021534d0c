//! An axum application that embeds the aggregation API beside its own routes.
//!
//! ```text
//! AGG_JWT_SECRET=$(openssl rand -base64 48) \
//! AGG_ENCRYPTION_KEYS=k1:$(openssl rand -base64 32) \
//! APP_CORS_ORIGINS=http://localhost:5173 \
//! cargo run -p aggregation-examples --example embed-axum
//! ```
//!
//! It serves `/` and `/connected` itself, the API under `/api/v1` and `/health`, and its own
//! 404 everywhere else. The settings are listed in `service.rs`.

use std::net::SocketAddr;

use aggregation_axum::{AggregationService, Mount, router_with};
use axum::Router;
use axum::extract::RawQuery;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::routing::get;
use tower_http::cors::CorsLayer;

mod service;

use service::{HostError, Settings, connected_page, exit_code, start, stop};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt().init();
    exit_code(run().await)
}

async fn run() -> Result<(), HostError> {
    let settings = Settings::from_env()?;
    let started = start(&settings).await?;
    let app = app(started.service, &settings.cors_origins)?;
    let listener = tokio::net::TcpListener::bind(settings.bind).await?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    // Connect info hands each client's address to the core; without it every client shares
    // one rate-limit bucket.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await?;
    stop(started.jobs, started.mail).await
}

/// The host's router: its own pages and fallback, the API, and CORS for its front ends.
fn app(service: AggregationService, cors_origins: &[String]) -> Result<Router, HostError> {
    Ok(Router::new()
        .route("/", get(|| async { "the host's home page" }))
        .route(
            "/connected",
            get(|RawQuery(query): RawQuery| async move { connected_page(query.as_deref()) }),
        )
        .merge(router_with(service, Mount::api().with_health()))
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such page on the host") })
        // Last, so that it wraps every route above; it answers preflights itself.
        .layer(cors(cors_origins)?))
}

/// Browsers on `origins` may call the API with a bearer token and JSON bodies, and read the
/// headers a client acts on.
fn cors(origins: &[String]) -> Result<CorsLayer, HostError> {
    let origins = origins
        .iter()
        .map(|origin| HeaderValue::from_str(origin))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| HostError::Invalid {
            variable: "APP_CORS_ORIGINS",
            message: e.to_string(),
        })?;
    Ok(CorsLayer::new()
        .allow_origin(origins)
        .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
        .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
        .expose_headers([
            header::RETRY_AFTER,
            header::ETAG,
            HeaderName::from_static("x-ratelimit-limit"),
            HeaderName::from_static("x-ratelimit-remaining"),
            HeaderName::from_static("x-ratelimit-reset"),
        ]))
}

/// Ctrl-C, or SIGTERM (what container runtimes and systemd send).
async fn shutdown_signal() {
    #[cfg(unix)]
    if let Ok(mut terminate) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::extract::ConnectInfo;
    use axum::http::Request;
    use tower::ServiceExt as _;

    use super::*;
    use crate::service::{REGISTRATION, sent_emails, test_settings};

    /// Sends one request as a client at 127.0.0.1 would; answers status, headers and body.
    async fn send(
        app: &Router,
        mut request: Request<Body>,
    ) -> (StatusCode, header::HeaderMap, String) {
        request
            .extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
        let response = app.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("a readable body");
        (status, headers, String::from_utf8_lossy(&body).into_owned())
    }

    fn get(uri: &str) -> Request<Body> {
        Request::get(uri)
            .body(Body::empty())
            .expect("a valid request")
    }

    #[tokio::test]
    async fn the_host_app_serves_its_pages_the_api_and_drains_mail_at_shutdown() {
        let dir = tempfile::tempdir().expect("temp dir");
        let settings = test_settings(dir.path());
        let started = start(&settings).await.expect("service");
        let app = app(started.service, &settings.cors_origins).expect("router");

        let (status, _, body) = send(&app, get("/")).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "the host's home page")
        );
        let (status, _, body) = send(&app, get("/nope")).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::NOT_FOUND, "no such page on the host")
        );
        let (status, _, _) = send(&app, get("/health")).await;
        assert_eq!(status, StatusCode::OK);
        let (status, headers, _) = send(&app, get("/api/v1/nope")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(
            headers[header::CONTENT_TYPE],
            "application/problem+json",
            "the API's own 404 under /api/v1"
        );

        let preflight = Request::options("/api/v1/sessions")
            .header(header::ORIGIN, "https://app.example.com")
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "content-type")
            .body(Body::empty())
            .expect("a valid request");
        let (status, headers, _) = send(&app, preflight).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://app.example.com"
        );

        let register = Request::post("/api/v1/users")
            .header(header::ORIGIN, "https://app.example.com")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(REGISTRATION))
            .expect("a valid request");
        let (status, headers, body) = send(&app, register).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(
            headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://app.example.com"
        );

        drop(app);
        stop(started.jobs, started.mail)
            .await
            .expect("jobs stopped, mail drained");
        assert_eq!(sent_emails(&settings), 1, "the verification email was sent");
    }
}
