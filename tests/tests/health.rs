//! Conformance: the liveness and readiness checks. `/health/live` asks no dependency;
//! `/health/ready` asks the store and the rate-limit store (Redis when configured) and answers
//! 503 `service_unavailable` while one of them does not answer (for the store, see
//! `store_unavailable.rs`). Neither is rate limited.

use std::sync::Arc;
use std::time::Duration;

use aggregation_core::rate_limit::{PolicyTable, RedisRateLimitStore};
use aggregation_tests::{Setup, TestApp, conformance};
use http::Method;

conformance!(setup = limited; live_and_ready_answer_ok_and_are_never_limited);

mod unreachable_redis {
    use super::*;

    conformance!(setup = redis_down; ready_is_503_while_redis_does_not_answer);
}

mod reachable_redis {
    use super::*;

    conformance!(setup = redis_up; live_and_ready_answer_ok_and_are_never_limited);
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
