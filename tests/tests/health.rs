//! Conformance: the liveness and readiness checks. `/health/live` asks no dependency;
//! `/health/ready` asks the store and the rate-limit store (Redis when configured) and answers
//! 503 `service_unavailable` while one of them does not answer (for the store, see
//! `store_unavailable.rs`). None of the three is rate limited by default; each has a per-IP
//! policy an override file can enable. Readiness answers from a check at most 1 s old (the
//! sharing of one check is a unit test of `api::health`).

use std::sync::Arc;
use std::time::Duration;

use aggregation_core::rate_limit::{
    InMemoryRateLimitStore, ManualClock, PolicyTable, RedisRateLimitStore,
};
use aggregation_tests::{Setup, TestApp, conformance};
use http::Method;

conformance!(setup = limited; live_and_ready_answer_ok_and_are_not_limited_by_default);

mod health_policy_enabled {
    use super::*;

    conformance!(setup = health_limited; an_enabled_health_policy_limits_per_ip);
}

mod unreachable_redis {
    use super::*;

    conformance!(setup = redis_down; ready_is_503_while_redis_does_not_answer);
}

mod reachable_redis {
    use super::*;

    conformance!(setup = redis_up; live_and_ready_answer_ok_and_are_not_limited_by_default);
}

/// Rate limiting on, so that the absence of rate-limit headers means something.
fn limited() -> Setup {
    Setup {
        policies: PolicyTable::builtin(),
        ..Setup::default()
    }
}

/// The built-in limits with `GET /health` enabled at 2 tokens per IP, over buckets whose clock
/// stands still (no refill while the case runs).
fn health_limited() -> Setup {
    let frozen = ManualClock::new(1_000.0);
    let policies = PolicyTable::builtin()
        .with_overrides_toml(
            r#"
            [[policy]]
            method = "GET"
            route = "/health"
            enabled = true
            max_tokens = 2
            refill_rate = 1
            "#,
        )
        .expect("valid override");
    Setup {
        policies,
        rate_limit_store: Some(Arc::new(InMemoryRateLimitStore::with_clock(frozen.clock()))),
        ..Setup::default()
    }
}

async fn live_and_ready_answer_ok_and_are_not_limited_by_default(app: TestApp) {
    for path in ["/health/live", "/health/ready", "/health"] {
        let response = app.get(path, None).await;
        let body = response.expect(200);
        assert_eq!(body, serde_json::json!({"status": "ok"}), "{path}");
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.header("x-ratelimit-limit"), None, "{path}");
    }
    // More than the policy's 100 tokens would allow, were it enabled.
    for _ in 0..110 {
        let response = app.get("/health", None).await;
        response.expect(200);
        assert_eq!(response.header("x-ratelimit-limit"), None);
    }
    // Only GET.
    let response = app.call(Method::POST, "/health/ready", None, None).await;
    response.expect_problem(405, "method_not_allowed");
}

async fn an_enabled_health_policy_limits_per_ip(app: TestApp) {
    for remaining in ["1", "0"] {
        let allowed = app.get("/health", None).await;
        allowed.expect(200);
        assert_eq!(allowed.header("x-ratelimit-limit"), Some("2"));
        assert_eq!(allowed.header("x-ratelimit-remaining"), Some(remaining));
    }
    let denied = app.get("/health", None).await;
    let body = denied.expect_problem(429, "rate_limit_exceeded");
    assert_eq!(denied.header("x-ratelimit-limit"), Some("2"));
    assert_eq!(denied.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(denied.header("retry-after"), Some("60"));
    assert_eq!(body["retry_after"], 60);
    // Only the endpoint the file enabled: the others stay unlimited.
    for path in ["/health/live", "/health/ready"] {
        let response = app.get(path, None).await;
        response.expect(200);
        assert_eq!(response.header("x-ratelimit-limit"), None, "{path}");
    }
}

/// The Redis of `AGG_TEST_REDIS_URL` as the rate-limit store; without it, the in-process store
/// (the case then runs as the plain one does).
fn redis_up() -> Setup {
    let Some(url) = std::env::var("AGG_TEST_REDIS_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
    else {
        eprintln!("AGG_TEST_REDIS_URL is not set: readiness is asked of the in-process store");
        return limited();
    };
    // Generous: the first ping also connects, and a loaded test machine can take longer than
    // the default 100 ms for that; this case is about the answer, not the bound.
    let limits = RedisRateLimitStore::from_url(
        &url,
        format!("aggtest:{}:", uuid::Uuid::new_v4().simple()),
        Duration::from_secs(2),
    )
    .expect("valid URL");
    Setup {
        rate_limit_store: Some(Arc::new(limits)),
        ..limited()
    }
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
