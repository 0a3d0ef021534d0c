//! Rate limiting shared through Redis by several service instances (`AGG_TEST_REDIS_URL`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aggregation_core::mail::MemoryMailer;
use aggregation_core::rate_limit::{PolicyTable, RateLimitStore, RedisRateLimitStore};
use aggregation_core::store::SqliteStore;
use aggregation_core::{AggregationService, PeerAddr};
use aggregation_tests::{delete_redis_keys, redis_url};
use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::Full;
use tower::ServiceExt as _;

async fn instance(limits: Arc<dyn RateLimitStore>) -> AggregationService {
    AggregationService::builder(aggregation_tests::test_config())
        .store(SqliteStore::in_memory().await.expect("store"))
        .mailer(MemoryMailer::new())
        .rate_limit_policies(PolicyTable::builtin())
        .rate_limit_store(limits)
        .build()
        .expect("service")
}

async fn login(service: &AggregationService) -> StatusCode {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/sessions")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from_static(
            br#"{"email": "nobody@example.com", "password": "Wrong-passw0rd"}"#,
        )))
        .expect("request");
    request
        .extensions_mut()
        .insert(PeerAddr(SocketAddr::from(([192, 0, 2, 10], 5555))));
    service
        .clone()
        .oneshot(request)
        .await
        .expect("infallible")
        .status()
}

fn prefix() -> String {
    format!("aggtest:{}:", uuid::Uuid::new_v4().simple())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_bucket_under_concurrent_load() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix();
    let limits = |prefix: &str| -> Arc<dyn RateLimitStore> {
        Arc::new(
            RedisRateLimitStore::from_url(&url, prefix.to_owned(), Duration::from_secs(2))
                .expect("redis store"),
        )
    };
    let first = instance(limits(&prefix)).await;
    let second = instance(limits(&prefix)).await;
    let attempts = (0..24).map(|index| {
        let service = if index % 2 == 0 {
            first.clone()
        } else {
            second.clone()
        };
        tokio::spawn(async move { login(&service).await })
    });
    let statuses = futures_util::future::join_all(attempts).await;
    let allowed = statuses
        .iter()
        .filter(|status| matches!(status, Ok(StatusCode::UNAUTHORIZED)))
        .count();
    let denied = statuses
        .iter()
        .filter(|status| matches!(status, Ok(StatusCode::TOO_MANY_REQUESTS)))
        .count();
    delete_redis_keys(&url, &prefix).await;
    assert_eq!(
        allowed, 5,
        "exactly max_tokens logins pass across both instances"
    );
    assert_eq!(denied, 19);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_redis_fails_open_within_the_timeout() {
    // Port 1 on loopback: nothing listens, as with a stopped Redis.
    let limits: Arc<dyn RateLimitStore> = Arc::new(
        RedisRateLimitStore::from_url("redis://127.0.0.1:1", prefix(), Duration::from_millis(100))
            .expect("redis store"),
    );
    let service = instance(limits).await;
    for _ in 0..7 {
        let started = Instant::now();
        assert_eq!(login(&service).await, StatusCode::UNAUTHORIZED);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "never a hung request"
        );
    }
}

/// `POST` a JSON body to a service from 192.0.2.10; the status and JSON answer.
async fn post_json(
    service: &AggregationService,
    path: &str,
    body: &serde_json::Value,
) -> (StatusCode, serde_json::Value) {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    request
        .extensions_mut()
        .insert(PeerAddr(SocketAddr::from(([192, 0, 2, 10], 5555))));
    let response = service.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_on_one_instance_throttle_the_account_on_another() {
    let Some(url) = redis_url() else { return };
    let prefix = prefix();
    let store: Arc<dyn aggregation_core::store::Store> =
        Arc::new(SqliteStore::in_memory().await.expect("store"));
    let mailer = MemoryMailer::new();
    let config = aggregation_tests::test_config().with_login_failure_limit(Some(
        aggregation_core::LoginFailureLimit::new(3, Duration::from_secs(3600)).expect("limit"),
    ));
    let instance = |mailer: MemoryMailer| {
        AggregationService::builder(config.clone())
            .shared_store(store.clone())
            .mailer(mailer)
            .rate_limit_policies(PolicyTable::disabled())
            .rate_limit_store(Arc::new(
                RedisRateLimitStore::from_url(&url, prefix.clone(), Duration::from_secs(2))
                    .expect("redis store"),
            ))
            .build()
            .expect("service")
    };
    let first = instance(mailer.clone());
    let second = instance(MemoryMailer::new());
    let email = "shared@example.com";
    let credentials = serde_json::json!({"email": email, "password": aggregation_tests::PASSWORD});
    let wrong = serde_json::json!({"email": email, "password": "Wrong-passw0rd"});
    let (registered, _) = post_json(&first, "/api/v1/users", &credentials).await;
    let sent = mailer.wait_for(email, 1, Duration::from_secs(10)).await;
    let token = sent
        .first()
        .and_then(|mail| aggregation_tests::extract_hex_token(&mail.text))
        .expect("verification token");
    let (verified, _) = post_json(
        &first,
        "/api/v1/email-verifications",
        &serde_json::json!({"token": token}),
    )
    .await;
    let (before, _) = post_json(&second, "/api/v1/sessions", &credentials).await;
    let mut failures = Vec::new();
    for _ in 0..3 {
        failures.push(post_json(&first, "/api/v1/sessions", &wrong).await.0);
    }
    let (after, body) = post_json(&second, "/api/v1/sessions", &credentials).await;
    let (on_first, _) = post_json(&first, "/api/v1/sessions", &credentials).await;
    delete_redis_keys(&url, &prefix).await;

    assert_eq!(
        (registered, verified, before),
        (
            StatusCode::CREATED,
            StatusCode::CREATED,
            StatusCode::CREATED
        )
    );
    assert!(failures.iter().all(|s| *s == StatusCode::UNAUTHORIZED));
    assert_eq!(after, StatusCode::UNAUTHORIZED);
    assert_eq!(body["detail"], "Email or password is incorrect.");
    assert_eq!(on_first, StatusCode::UNAUTHORIZED);
}
