//! Conformance: rate limiting with the built-in policies, in process.

use aggregation_core::events::DomainEvent;
use aggregation_core::rate_limit::{PolicyTable, RateLimitEvent};
use aggregation_tests::{Setup, TestApp, conformance};
use http::{Method, Request, header};
use serde_json::json;

fn limited() -> Setup {
    Setup {
        policies: PolicyTable::builtin(),
        ..Setup::default()
    }
}

conformance!(
    setup = limited;
    sixth_login_in_a_minute_is_429,
    allowed_responses_carry_rate_limit_headers,
    spoofed_forwarded_for_is_ignored_without_a_trusted_proxy,
    user_scope_needs_a_verified_token,
    unlimited_routes_carry_no_headers,
);

async fn attempt_login(
    app: &TestApp,
    forwarded_for: Option<&str>,
) -> aggregation_tests::TestResponse {
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/sessions")
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(address) = forwarded_for {
        builder = builder.header("x-forwarded-for", address);
    }
    let body = json!({"email": "nobody@example.com", "password": "Wrong-passw0rd"});
    app.send(
        builder
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .expect("request"),
    )
    .await
}

async fn sixth_login_in_a_minute_is_429(app: TestApp) {
    for _ in 0..5 {
        attempt_login(&app, None)
            .await
            .expect_problem(401, "unauthorized");
    }
    let denied = attempt_login(&app, None).await;
    let body = denied.expect_problem(429, "rate_limit_exceeded");
    assert_eq!(denied.header("retry-after"), Some("12"));
    assert_eq!(body["retry_after"], 12);
    assert_eq!(body["title"], "Rate Limit Exceeded");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("12 seconds"))
    );
    assert_eq!(body["instance"], "/api/v1/sessions");
    assert_eq!(denied.header("x-ratelimit-limit"), Some("5"));
    assert_eq!(denied.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(denied.header("x-ratelimit-reset"), Some("60"));
    let denials = app
        .events
        .events()
        .into_iter()
        .filter(|event| matches!(event, DomainEvent::RateLimit(RateLimitEvent::Denied { .. })))
        .count();
    assert_eq!(denials, 1);
}

async fn allowed_responses_carry_rate_limit_headers(app: TestApp) {
    let first = attempt_login(&app, None).await;
    assert_eq!(first.header("x-ratelimit-limit"), Some("5"));
    assert_eq!(first.header("x-ratelimit-remaining"), Some("4"));
    assert_eq!(first.header("x-ratelimit-reset"), Some("12"));
    let register = app
        .post(
            "/api/v1/users",
            &json!({"email": "quota@example.com", "password": aggregation_tests::PASSWORD}),
            None,
        )
        .await;
    register.expect(201);
    assert_eq!(register.header("x-ratelimit-limit"), Some("3"));
    assert_eq!(register.header("x-ratelimit-remaining"), Some("2"));
}

async fn spoofed_forwarded_for_is_ignored_without_a_trusted_proxy(app: TestApp) {
    for index in 0..5 {
        attempt_login(&app, Some(&format!("198.51.100.{index}")))
            .await
            .expect_problem(401, "unauthorized");
    }
    attempt_login(&app, Some("198.51.100.99"))
        .await
        .expect_problem(429, "rate_limit_exceeded");
    let identifiers: Vec<String> = app
        .events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::RateLimit(RateLimitEvent::Attempted { identifier, .. }) => {
                Some(identifier)
            }
            _ => None,
        })
        .collect();
    assert_eq!(identifiers.len(), 6);
    assert!(
        identifiers
            .iter()
            .all(|identifier| identifier == "127.0.0.1")
    );
}

async fn user_scope_needs_a_verified_token(app: TestApp) {
    // Registration, verification and login spend IP-scoped tokens; then reads are USER-scoped.
    let (user_id, access, _) = app.user("scoped@example.com").await;
    app.get("/api/v1/sessions", Some(&access)).await.expect(200);
    let forged = format!("{}x", &access[..access.len() - 1]);
    app.get("/api/v1/sessions", Some(&forged))
        .await
        .expect_problem(401, "unauthorized");
    let reads: Vec<(String, String)> = app
        .events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::RateLimit(RateLimitEvent::Attempted {
                endpoint,
                identifier,
                scope,
                ..
            }) if endpoint == "GET /api/v1/sessions" => Some((scope, identifier)),
            _ => None,
        })
        .collect();
    assert_eq!(
        reads,
        [
            ("USER".to_owned(), user_id),
            ("IP".to_owned(), "127.0.0.1".to_owned())
        ]
    );
}

async fn unlimited_routes_carry_no_headers(app: TestApp) {
    let health = app.get("/health", None).await;
    health.expect(200);
    assert_eq!(health.header("x-ratelimit-limit"), None);
}
