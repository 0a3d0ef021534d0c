//! Conformance: rate limiting with the built-in policies, in process.

use aggregation_core::events::DomainEvent;
use std::sync::Arc;

use aggregation_core::rate_limit::{
    InMemoryRateLimitStore, ManualClock, PolicyTable, RateLimitEvent,
};
use aggregation_tests::{Setup, TestApp, conformance};
use http::{Method, Request, header};
use serde_json::json;

/// Built-in policies over buckets whose clock stands still: no token refills while a slow
/// machine sends the requests, so the figures these cases assert are exact.
fn limited() -> Setup {
    let frozen = ManualClock::new(1_000.0);
    Setup {
        policies: PolicyTable::builtin(),
        rate_limit_store: Some(Arc::new(InMemoryRateLimitStore::with_clock(frozen.clock()))),
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

/// Request bodies above this are 413 in [`limited_sandbox`].
const SMALL_BODY_LIMIT: usize = 16 * 1024;

/// The provider sandbox, with the built-in limits and a small body limit.
fn limited_sandbox() -> Setup {
    let sandbox = aggregation_tests::sandbox_setup();
    Setup {
        policies: PolicyTable::builtin(),
        config: sandbox.config.clone().with_max_body_bytes(SMALL_BODY_LIMIT),
        ..sandbox
    }
}

mod per_connection {
    use super::*;
    conformance!(
        setup = limited_sandbox;
        bulk_syncs_are_limited_per_connection,
    );
}

async fn bulk_syncs_are_limited_per_connection(app: TestApp) {
    let (user_id, token, _) = app.user("syncer@example.com").await;
    let first = app.connect_sandbox(&token, None).await;
    let second = app.connect_sandbox(&token, Some("Second")).await;
    let first_id = first["id"].as_str().expect("id").to_owned();
    let second_id = second["id"].as_str().expect("id").to_owned();
    assert_ne!(first_id, second_id);
    // `force` skips the five-minute cool-down, so every 429 here is the rate limiter's.
    let sync = |connection: &str| json!({"connection_id": connection, "force": true});
    for n in 0..10 {
        let allowed = app
            .post("/api/v1/accounts/syncs", &sync(&first_id), Some(&token))
            .await;
        allowed.expect(201);
        assert_eq!(allowed.header("x-ratelimit-limit"), Some("10"));
        let remaining = (9 - n).to_string();
        assert_eq!(allowed.header("x-ratelimit-remaining"), Some(&*remaining));
    }
    let denied = app
        .post("/api/v1/accounts/syncs", &sync(&first_id), Some(&token))
        .await;
    denied.expect_problem(429, "rate_limit_exceeded");
    assert_eq!(denied.header("x-ratelimit-remaining"), Some("0"));
    let retry: u64 = denied
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("Retry-After");
    assert!((1..=12).contains(&retry), "{retry}");
    // Another spelling of the same id shares the bucket.
    app.post(
        "/api/v1/accounts/syncs",
        &sync(&first_id.to_uppercase()),
        Some(&token),
    )
    .await
    .expect_problem(429, "rate_limit_exceeded");
    // The user's other connection has its own bucket.
    let other = app
        .post("/api/v1/accounts/syncs", &sync(&second_id), Some(&token))
        .await;
    other.expect(201);
    assert_eq!(other.header("x-ratelimit-remaining"), Some("9"));
    // A transactions sync of the first connection is another endpoint, with its own bucket,
    // and the handler still sees the whole body (here: an unknown account is 404).
    let body = json!({
        "connection_id": first_id,
        "account_id": uuid::Uuid::now_v7(),
        "force": true,
    });
    let transactions = app
        .post("/api/v1/transactions/syncs", &body, Some(&token))
        .await;
    assert_ne!(transactions.status.as_u16(), 429);
    assert_eq!(transactions.header("x-ratelimit-remaining"), Some("9"));
    // A body without a usable connection id is charged to the user alone; the handler says why.
    let problem = app
        .post(
            "/api/v1/accounts/syncs",
            &json!({"force": true}),
            Some(&token),
        )
        .await;
    let body = problem.expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "connection_id");
    assert_eq!(problem.header("x-ratelimit-remaining"), Some("9"));
    // An oversized body is 413, and still charged (to the user alone: it was not read).
    let oversized = json!({
        "connection_id": second_id,
        "padding": "x".repeat(SMALL_BODY_LIMIT),
    });
    let too_large = app
        .post("/api/v1/accounts/syncs", &oversized, Some(&token))
        .await;
    too_large.expect_problem(413, "payload_too_large");
    assert_eq!(too_large.header("x-ratelimit-remaining"), Some("8"));

    let identifiers: Vec<String> = app
        .events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::RateLimit(RateLimitEvent::Attempted {
                endpoint,
                identifier,
                scope,
                ..
            }) if endpoint == "POST /api/v1/accounts/syncs" => {
                assert_eq!(scope, "USER_PROVIDER");
                Some(identifier)
            }
            _ => None,
        })
        .collect();
    let on_first = format!("{user_id}:{first_id}");
    let on_second = format!("{user_id}:{second_id}");
    assert_eq!(identifiers.len(), 15);
    assert!(identifiers[..12].iter().all(|id| *id == on_first));
    assert_eq!(identifiers[12], on_second);
    assert_eq!(identifiers[13..], [user_id.clone(), user_id]);
}

/// The built-in limits, with `GET /api/v1/accounts/{id}` at 3 tokens per user and account.
fn small_account_reads() -> Setup {
    let policies = PolicyTable::builtin()
        .with_overrides_toml(
            r#"
            [[policy]]
            method = "GET"
            route = "/api/v1/accounts/{id}"
            max_tokens = 3
            refill_rate = 3
            scope = "user_account"
            "#,
        )
        .expect("valid override");
    Setup {
        policies,
        ..Setup::default()
    }
}

mod canonical_keys {
    use super::*;
    conformance!(
        setup = small_account_reads;
        other_spellings_of_an_id_share_its_bucket,
        junk_ids_share_the_template_bucket,
    );
}

async fn other_spellings_of_an_id_share_its_bucket(app: TestApp) {
    let (user_id, token, _) = app.user("speller@example.com").await;
    let id = uuid::Uuid::now_v7().hyphenated().to_string();
    for n in 0..3 {
        // An unknown account: 404 from the handler, after the limiter let it through.
        let allowed = app
            .get(&format!("/api/v1/accounts/{id}"), Some(&token))
            .await;
        allowed.expect_problem(404, "not_found");
        let remaining = (2 - n).to_string();
        assert_eq!(allowed.header("x-ratelimit-remaining"), Some(&*remaining));
    }
    for spelling in [
        id.clone(),
        id.to_uppercase(),
        id.replace('-', ""),
        id.to_uppercase().replace('-', ""),
        format!("urn:uuid:{id}"),
    ] {
        let denied = app
            .get(&format!("/api/v1/accounts/{spelling}"), Some(&token))
            .await;
        denied.expect_problem(429, "rate_limit_exceeded");
        assert_eq!(denied.header("x-ratelimit-remaining"), Some("0"));
    }
    // Another account has its own bucket.
    let other = uuid::Uuid::now_v7().hyphenated().to_string();
    let fresh = app
        .get(&format!("/api/v1/accounts/{other}"), Some(&token))
        .await;
    fresh.expect_problem(404, "not_found");
    assert_eq!(fresh.header("x-ratelimit-remaining"), Some("2"));

    let identifiers: Vec<String> = app
        .events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::RateLimit(RateLimitEvent::Attempted {
                endpoint,
                identifier,
                scope,
                ..
            }) if endpoint == "GET /api/v1/accounts/{id}" => {
                assert_eq!(scope, "USER_ACCOUNT");
                Some(identifier)
            }
            _ => None,
        })
        .collect();
    assert_eq!(identifiers.len(), 9);
    let on_id = format!("{user_id}:{id}");
    assert!(
        identifiers[..8]
            .iter()
            .all(|identifier| *identifier == on_id)
    );
    assert_eq!(identifiers[8], format!("{user_id}:{other}"));
}

async fn junk_ids_share_the_template_bucket(app: TestApp) {
    let (user_id, token, _) = app.user("junk@example.com").await;
    for n in 0..3 {
        // Not a UUID: 422 from the handler, charged to the user's one bucket for junk.
        let allowed = app
            .get(&format!("/api/v1/accounts/junk-{n}"), Some(&token))
            .await;
        allowed.expect_problem(422, "validation_failed");
        let remaining = (2 - n).to_string();
        assert_eq!(allowed.header("x-ratelimit-remaining"), Some(&*remaining));
    }
    for junk in ["junk-3", "another", "0192f3c4", "%7Bnot-a-uuid%7D"] {
        app.get(&format!("/api/v1/accounts/{junk}"), Some(&token))
            .await
            .expect_problem(429, "rate_limit_exceeded");
    }
    // A real id is still its own bucket.
    let id = uuid::Uuid::now_v7();
    let real = app
        .get(&format!("/api/v1/accounts/{id}"), Some(&token))
        .await;
    real.expect_problem(404, "not_found");
    assert_eq!(real.header("x-ratelimit-remaining"), Some("2"));
    let identifiers: Vec<String> = app
        .events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::RateLimit(RateLimitEvent::Attempted {
                endpoint,
                identifier,
                ..
            }) if endpoint == "GET /api/v1/accounts/{id}" => Some(identifier),
            _ => None,
        })
        .collect();
    assert_eq!(identifiers.len(), 8);
    assert!(
        identifiers[..7]
            .iter()
            .all(|identifier| *identifier == user_id)
    );
}

/// The built-in limits behind a trusted proxy on loopback, so that over HTTP the client
/// address comes from `X-Forwarded-For`.
fn behind_a_loopback_proxy() -> Setup {
    Setup {
        config: aggregation_tests::test_config().with_trusted_proxies(
            aggregation_core::rate_limit::parse_cidr_list("127.0.0.0/8, ::1")
                .expect("valid CIDR list"),
        ),
        policies: PolicyTable::builtin(),
        ..Setup::default()
    }
}

mod ipv6 {
    use super::*;
    conformance!(
        setup = behind_a_loopback_proxy;
        ipv6_clients_share_a_bucket_per_64_prefix,
    );
}

/// A failed login from `client`: the peer itself on the bare service, the forwarded client
/// behind the loopback proxy over HTTP.
async fn login_from(app: &TestApp, client: &str) -> aggregation_tests::TestResponse {
    let address: std::net::IpAddr = client.parse().expect("address");
    let body = json!({"email": "nobody@example.com", "password": "Wrong-passw0rd"});
    let mut request = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/sessions")
        .header(header::CONTENT_TYPE, "application/json")
        .header("x-forwarded-for", client)
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .expect("request");
    request
        .extensions_mut()
        .insert(aggregation_core::PeerAddr(std::net::SocketAddr::new(
            address, 40_000,
        )));
    app.send(request).await
}

async fn ipv6_clients_share_a_bucket_per_64_prefix(app: TestApp) {
    // Five addresses of one /64: one client.
    for client in [
        "2001:db8:1:2::1",
        "2001:db8:1:2::2",
        "2001:db8:1:2:ffff::1",
        "2001:db8:1:2:abcd:ef01:2345:6789",
        "2001:db8:1:2::5",
    ] {
        login_from(&app, client)
            .await
            .expect_problem(401, "unauthorized");
    }
    let denied = login_from(&app, "2001:db8:1:2::99").await;
    denied.expect_problem(429, "rate_limit_exceeded");
    // The neighbouring /64 is another client.
    let other = login_from(&app, "2001:db8:1:3::1").await;
    other.expect_problem(401, "unauthorized");
    assert_eq!(other.header("x-ratelimit-remaining"), Some("4"));
    // An IPv4-mapped address is its IPv4 client.
    let mapped = login_from(&app, "::ffff:198.51.100.7").await;
    mapped.expect_problem(401, "unauthorized");
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
    assert_eq!(identifiers.len(), 8);
    assert!(identifiers[..6].iter().all(|id| id == "2001:db8:1:2::/64"));
    assert_eq!(identifiers[6], "2001:db8:1:3::/64");
    assert_eq!(identifiers[7], "198.51.100.7");
}
