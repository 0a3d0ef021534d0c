//! Conformance: the liveness and readiness checks. `/health/live` asks no dependency;
//! `/health/ready` asks the store and the rate-limit store (Redis when configured) and answers
//! 503 `service_unavailable` while one of them does not answer. Neither is rate limited.

use std::sync::Arc;
use std::time::Duration;

use aggregation_core::AggregationService;
use aggregation_core::mail::MemoryMailer;
use aggregation_core::rate_limit::{PolicyTable, RedisRateLimitStore};
use aggregation_core::store::PostgresStore;
use aggregation_tests::{Setup, TestApp, conformance};
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt as _, Full};
use tower::ServiceExt as _;

conformance!(setup = limited; live_and_ready_answer_ok_and_are_never_limited);

mod unreachable_redis {
    use super::*;

    conformance!(setup = redis_down; ready_is_503_while_redis_does_not_answer);
}

/// Rate limiting on, so that the absence of rate-limit headers means something.
fn limited() -> Setup {
    Setup {
        policies: PolicyTable::builtin(),
        ..Setup::default()
    }
}

async fn live_and_ready_answer_ok_and_are_never_limited(app: TestApp) {
    for path in ["/health/live", "/health/ready", "/health"] {
        let response = app.get(path, None).await;
        let body = response.expect(200);
        assert_eq!(body, serde_json::json!({"status": "ok"}), "{path}");
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.header("x-ratelimit-limit"), None, "{path}");
    }
    // Only GET.
    let response = app.call(Method::POST, "/health/ready", None, None).await;
    response.expect_problem(405, "method_not_allowed");
}

/// Nothing listens on port 1: every Redis call fails at once.
fn redis_down() -> Setup {
    let limits = RedisRateLimitStore::from_url(
        "redis://127.0.0.1:1",
        "aggtest:".to_owned(),
        RedisRateLimitStore::DEFAULT_TIMEOUT,
    )
    .expect("valid URL");
    Setup {
        rate_limit_store: Some(Arc::new(limits)),
        ..limited()
    }
}

async fn ready_is_503_while_redis_does_not_answer(app: TestApp) {
    app.get("/health/ready", None)
        .await
        .expect_problem(503, "service_unavailable");
    // The store answers: the instance is alive, and `/health` (the store check) is as before.
    app.get("/health/live", None).await.expect(200);
    app.get("/health", None).await.expect(200);
}

async fn get(service: &AggregationService, path: &str) -> (u16, serde_json::Value) {
    let response = service
        .clone()
        .oneshot(
            Request::builder()
                .method(Method::GET)
                .uri(path)
                .body(Full::new(Bytes::new()))
                .expect("request"),
        )
        .await
        .expect("infallible");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_is_503_and_live_200_while_the_store_does_not_answer() {
    // Nothing listens on port 1: the pool gives up after its acquire timeout.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(1))
        .connect_lazy("postgres://postgres@127.0.0.1:1/unreachable")
        .expect("valid URL");
    let service = AggregationService::builder(aggregation_tests::test_config())
        .store(PostgresStore::new(pool))
        .mailer(MemoryMailer::new())
        .build()
        .expect("service");
    let (status, body) = get(&service, "/health/live").await;
    assert_eq!((status, body), (200, serde_json::json!({"status": "ok"})));
    let (status, problem) = get(&service, "/health/ready").await;
    assert_eq!(status, 503);
    assert!(
        problem["type"]
            .as_str()
            .is_some_and(|kind| kind.ends_with("/errors/service_unavailable")),
        "{problem}"
    );
    // Nothing about the database leaks into the body.
    assert!(!problem.to_string().contains("127.0.0.1:1"), "{problem}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_asks_a_reachable_redis() {
    let Some(url) = std::env::var("AGG_TEST_REDIS_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
    else {
        eprintln!("skipping Redis case: AGG_TEST_REDIS_URL is not set");
        return;
    };
    let limits = RedisRateLimitStore::from_url(
        &url,
        format!("aggtest:{}:", uuid::Uuid::new_v4().simple()),
        RedisRateLimitStore::DEFAULT_TIMEOUT,
    )
    .expect("valid URL");
    let service = AggregationService::builder(aggregation_tests::test_config())
        .store(
            aggregation_core::store::SqliteStore::in_memory()
                .await
                .expect("store"),
        )
        .mailer(MemoryMailer::new())
        .rate_limit_store(Arc::new(limits))
        .build()
        .expect("service");
    let (status, body) = get(&service, "/health/ready").await;
    assert_eq!((status, body), (200, serde_json::json!({"status": "ok"})));
}
