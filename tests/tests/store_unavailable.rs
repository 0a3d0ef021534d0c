//! A store that cannot be reached fails closed with 503 within the store timeout, never a hang.

use std::time::{Duration, Instant};

use aggregation_core::AggregationService;
use aggregation_core::mail::MemoryMailer;
use aggregation_core::store::PostgresStore;
use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt as _, Full};
use tower::ServiceExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_database_is_503() {
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
    for (method, path, body) in [
        (
            Method::POST,
            "/api/v1/sessions",
            r#"{"email":"ada@example.com","password":"x"}"#,
        ),
        (Method::GET, "/health", ""),
    ] {
        let started = Instant::now();
        let response = service
            .clone()
            .oneshot(
                Request::builder()
                    .method(method)
                    .uri(path)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from_static(body.as_bytes())))
                    .expect("request"),
            )
            .await
            .expect("infallible");
        assert_eq!(response.status().as_u16(), 503, "{path}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let problem: serde_json::Value = serde_json::from_slice(&body).expect("problem json");
        assert!(
            problem["type"]
                .as_str()
                .is_some_and(|kind| kind.ends_with("/errors/service_unavailable"))
        );
        // Nothing about the database leaks into the body.
        assert!(!String::from_utf8_lossy(&body).contains("127.0.0.1:1"));
    }
}
