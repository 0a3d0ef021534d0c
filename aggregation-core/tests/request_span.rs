//! What is logged while a request is handled, or while a job runs, carries the request's trace
//! id (the `request` span) or the job's name and run id (the `job` span). The log is captured
//! through the `fmt` subscriber an operator would use, installed for this whole test binary.
#![cfg(all(feature = "sqlite", feature = "testing"))]

use std::sync::OnceLock;

use aggregation_core::mail::MemoryMailer;
use aggregation_core::testing::CapturedLog;
use aggregation_core::{AggregationService, Config, SqliteStore};
use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt as _, Full};
use tower::ServiceExt as _;

/// The log of the binary. Global, not per thread: a thread-local subscriber can miss events
/// whose call site another test's thread registered first.
fn captured() -> &'static CapturedLog {
    static LOG: OnceLock<CapturedLog> = OnceLock::new();
    LOG.get_or_init(|| {
        let captured = CapturedLog::default();
        let writer = captured.clone();
        // Debug level: a job run that finds nothing to do logs its end at debug only.
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .finish();
        // The only place in this binary that sets one.
        let _ = tracing::subscriber::set_global_default(subscriber);
        captured
    })
}

async fn service() -> AggregationService {
    let config = Config::new("http://localhost:8080", vec![7; 32]).expect("config");
    AggregationService::builder(config)
        .store(SqliteStore::in_memory().await.expect("store"))
        .mailer(MemoryMailer::new())
        .build()
        .expect("service")
}

#[tokio::test]
async fn what_a_use_case_logs_carries_the_trace_id_of_its_request() {
    let log = captured();
    let service = service().await;
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let response = service
        .oneshot(
            Request::builder()
                .method(Method::POST)
                .uri("/api/v1/users")
                .header(header::CONTENT_TYPE, "application/json")
                .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
                .body(Full::new(Bytes::from_static(
                    br#"{"email":"span@example.com","password":"Corr3ct-Horse!"}"#,
                )))
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(response.status().as_u16(), 201);
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let user: serde_json::Value = serde_json::from_slice(&body).expect("json");
    let user_id = user["id"].as_str().expect("id");
    let lines = log.lines();
    // The registration use case emits its domain event through the default event sink, which
    // logs it; the line names the request it happened in.
    let event = lines
        .iter()
        .find(|line| line.contains("domain event") && line.contains(user_id))
        .unwrap_or_else(|| panic!("no domain event logged:\n{}", lines.join("\n")));
    assert!(
        event.contains(&format!("request{{trace_id={trace_id}")),
        "{event}"
    );
    assert!(event.contains("route=/api/v1/users"), "{event}");
}

#[tokio::test]
async fn what_a_job_logs_carries_the_job_and_its_run_id() {
    let log = captured();
    let service = service().await;
    service
        .jobs()
        .run_once("purge_expired")
        .await
        .expect("runs");
    let lines = log.lines();
    let finished: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains("job finished") && line.contains("purge_expired"))
        .collect();
    assert_eq!(finished.len(), 1, "{}", lines.join("\n"));
    assert!(
        finished[0].contains("job{job=purge_expired run_id="),
        "{}",
        finished[0]
    );
}
