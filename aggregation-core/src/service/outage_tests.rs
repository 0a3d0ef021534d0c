//! What the whole service logs while a backing service is down: the outage once when it
//! starts, not a line per request (a Redis outage wrote two ERROR lines per request).

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::Full;
use tower::ServiceExt as _;

use crate::mail::MemoryMailer;
use crate::rate_limit::{BucketPolicy, Decision, PolicyTable, RateLimitStore, RateLimitStoreError};
use crate::store::SqliteStore;
use crate::testing::CapturedLog;
use crate::{AggregationService, Config, PeerAddr};

const REQUESTS: usize = 20;

/// A rate-limit store that never answers, like a Redis refusing connections.
struct DownRateLimitStore;

fn refused() -> RateLimitStoreError {
    RateLimitStoreError::Backend("connection refused".into())
}

#[async_trait]
impl RateLimitStore for DownRateLimitStore {
    async fn check(&self, _: &str, _: &BucketPolicy) -> Result<Decision, RateLimitStoreError> {
        Err(refused())
    }

    async fn peek(&self, _: &str, _: &BucketPolicy) -> Result<Decision, RateLimitStoreError> {
        Err(refused())
    }

    async fn ping(&self) -> Result<(), RateLimitStoreError> {
        Err(refused())
    }
}

fn login() -> Request<Full<Bytes>> {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/sessions")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from_static(
            br#"{"email": "ada@example.com", "password": "Wrong-passw0rd!"}"#,
        )))
        .expect("request");
    request
        .extensions_mut()
        .insert(PeerAddr(SocketAddr::from(([192, 0, 2, 7], 4000))));
    request
}

fn config() -> Config {
    Config::new("http://aggregation.test", vec![7; 32]).expect("config")
}

/// The WARN and ERROR lines of what the current thread logs while the guard lives (the tests
/// run on a current-thread runtime, so the service's tasks log here too).
fn capture() -> (CapturedLog, tracing::subscriber::DefaultGuard) {
    let captured = CapturedLog::default();
    let subscriber = captured.subscriber(tracing::Level::WARN);
    (captured, tracing::subscriber::set_default(subscriber))
}

#[tokio::test]
async fn a_rate_limit_store_outage_is_logged_once_not_per_request() {
    let (log, _guard) = capture();
    let service = AggregationService::builder(config())
        .store(SqliteStore::in_memory().await.expect("store"))
        .mailer(MemoryMailer::new())
        .rate_limit_policies(PolicyTable::builtin())
        .rate_limit_store(Arc::new(DownRateLimitStore))
        .build()
        .expect("service");
    for _ in 0..REQUESTS {
        let response = service.clone().oneshot(login()).await.expect("infallible");
        // Fail-open: the wrong password is what decides.
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }
    let lines = log.lines();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("ERROR"), "{}", lines[0]);
    assert!(
        lines[0].contains("rate-limit store outage started"),
        "{}",
        lines[0]
    );
    // The spec's fail-open record: the limiter met the outage first.
    for field in [
        "endpoint=POST /api/v1/sessions",
        "identifier=192.0.2.7",
        "layer=\"rate_limit\"",
        "result=\"fail_open\"",
    ] {
        assert!(lines[0].contains(field), "{field} in {}", lines[0]);
    }
}

#[tokio::test]
async fn a_store_outage_is_logged_once_not_per_request() {
    let (log, _guard) = capture();
    let store = SqliteStore::in_memory().await.expect("store");
    store.pool().close().await;
    let service = AggregationService::builder(config())
        .store(store)
        .mailer(MemoryMailer::new())
        .rate_limit_policies(PolicyTable::disabled())
        .build()
        .expect("service");
    for _ in 0..REQUESTS {
        let response = service.clone().oneshot(login()).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            response.headers().get(header::RETRY_AFTER),
            Some(&http::HeaderValue::from(1))
        );
    }
    // The breaker opens once a ping in the background fails as well; this runtime runs it
    // when the test yields.
    for _ in 0..100 {
        if log.lines().len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let lines = log.lines();
    // The outage, and the breaker opening; nothing per request.
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(lines[0].contains("ERROR"), "{}", lines[0]);
    assert!(lines[0].contains("store outage started"), "{}", lines[0]);
    assert!(lines[1].contains("circuit breaker open"), "{}", lines[1]);
}
