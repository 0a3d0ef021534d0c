//! Conformance: X-Forwarded-For is read only from trusted proxies.

use aggregation_core::rate_limit::{PolicyTable, parse_cidr_list};
use aggregation_tests::{Setup, TestApp, conformance, test_config};
use http::{Method, Request, header};
use serde_json::json;

fn behind_a_trusted_proxy() -> Setup {
    Setup {
        config: test_config()
            .with_trusted_proxies(parse_cidr_list("127.0.0.0/8").expect("valid CIDR list")),
        policies: PolicyTable::builtin(),
        ..Setup::default()
    }
}

conformance!(setup = behind_a_trusted_proxy; forwarded_clients_get_their_own_buckets);

async fn login_from(app: &TestApp, client: &str) -> aggregation_tests::TestResponse {
    let body = json!({"email": "nobody@example.com", "password": "Wrong-passw0rd"});
    app.send(
        Request::builder()
            .method(Method::POST)
            .uri("/api/v1/sessions")
            .header(header::CONTENT_TYPE, "application/json")
            .header("x-forwarded-for", format!("{client}, 127.0.0.2"))
            .body(http_body_util::Full::new(bytes::Bytes::from(
                body.to_string(),
            )))
            .expect("request"),
    )
    .await
}

async fn forwarded_clients_get_their_own_buckets(app: TestApp) {
    for _ in 0..5 {
        login_from(&app, "203.0.113.7")
            .await
            .expect_problem(401, "unauthorized");
    }
    login_from(&app, "203.0.113.7")
        .await
        .expect_problem(429, "rate_limit_exceeded");
    // Another client behind the same proxy still has its whole bucket.
    let other = login_from(&app, "203.0.113.8").await;
    other.expect_problem(401, "unauthorized");
    assert_eq!(other.header("x-ratelimit-remaining"), Some("4"));
}
