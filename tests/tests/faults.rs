//! Conformance: faults of the backing services, injected through a TCP proxy the test controls
//! ([`FaultProxy`]) in front of PostgreSQL (`AGG_TEST_DATABASE_URL`) and Redis
//! (`AGG_TEST_REDIS_URL`); each case is skipped, saying so, when its server is not configured.
//!
//! - The store refusing connections, then hung, then back: never a 500; every failure is 503
//!   `service_unavailable` with `Retry-After`; once the circuit breaker is open a hung store is
//!   answered without reaching it (counted in connections the proxy accepts, not timed);
//!   readiness says so; recovery answers 2xx again.
//! - The rate-limit store refusing, then hung, then back: requests are let through (fail-open)
//!   and never answered 5xx; limiting resumes once it is back.
//!
//! Each phase prints its answers and latencies (run with `--nocapture` to see them).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aggregation_core::rate_limit::{PolicyTable, RateLimitStore, RedisRateLimitStore};
use aggregation_core::store::PostgresStore;
use aggregation_core::testing::ThrowawayDatabase;
use aggregation_tests::proxy::{Fault, FaultProxy, upstream_of};
use aggregation_tests::{
    Backend, PASSWORD, Setup, Target, TestApp, TestResponse, postgres_url, redis_url, run_setup,
};
use futures_util::FutureExt as _;
use serde_json::json;

/// The store timeout of the case's pool: short, so the slow answers before the breaker opens
/// do not make the case long.
const STORE_TIMEOUT: Duration = Duration::from_secs(1);

const EMAIL: &str = "ada@example.com";

/// Calls in a row failing as unavailable that open the store's circuit breaker (the
/// service's `FAILURES_TO_OPEN`).
const FAILURES_TO_OPEN: usize = 3;

/// Requests sent while the store is hung, after the ones that open the breaker.
const HUNG_REQUESTS: usize = 20;

/// How long a recovery may take to be seen: the breaker pings every second.
const RECOVERY_ATTEMPTS: usize = 150;

fn login_body(password: &str) -> serde_json::Value {
    json!({"email": EMAIL, "password": password})
}

/// What one phase saw: statuses and latencies, printed for the record.
#[derive(Default)]
struct Phase {
    answers: Vec<(u16, Duration)>,
}

impl Phase {
    async fn send(&mut self, app: &TestApp, password: &str) -> TestResponse {
        let started = Instant::now();
        let response = app
            .post("/api/v1/sessions", &login_body(password), None)
            .await;
        self.answers
            .push((response.status.as_u16(), started.elapsed()));
        response
    }

    fn print(&self, target: Target, name: &str) {
        let mut latencies: Vec<Duration> = self.answers.iter().map(|(_, took)| *took).collect();
        latencies.sort();
        let mut statuses: Vec<u16> = self.answers.iter().map(|(status, _)| *status).collect();
        statuses.dedup();
        let total: Duration = latencies.iter().sum();
        eprintln!(
            "{target:?} {name}: {} requests, statuses {statuses:?}, latency min {:?} median {:?} \
             max {:?}, total {total:?}",
            latencies.len(),
            latencies.first().copied().unwrap_or_default(),
            latencies
                .get(latencies.len() / 2)
                .copied()
                .unwrap_or_default(),
            latencies.last().copied().unwrap_or_default(),
        );
    }
}

/// A 503 `service_unavailable` with a whole number of seconds in `Retry-After`.
#[track_caller]
fn assert_unavailable(response: &TestResponse) {
    response.expect_problem(503, "service_unavailable");
    let retry_after = response.header("retry-after").expect("Retry-After");
    assert!(
        retry_after.parse::<u64>().is_ok_and(|seconds| seconds >= 1),
        "Retry-After: {retry_after}"
    );
}

/// `/health/ready` once it reflects the current state: it answers from a check at most 1 s
/// old, so the answer is awaited for a little longer than that.
async fn readiness(app: &TestApp, status: u16) -> TestResponse {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let response = app.get("/health/ready", None).await;
        if response.status.as_u16() == status || tokio::time::Instant::now() >= deadline {
            return response;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn postgres_faults(target: Target) {
    let Some(admin_url) = postgres_url() else {
        eprintln!("skipping PostgreSQL fault case: AGG_TEST_DATABASE_URL is not set");
        return;
    };
    let database = ThrowawayDatabase::create(&admin_url, "agg_faults")
        .await
        .expect("a database of the case's own");
    let proxy = Arc::new(FaultProxy::start(upstream_of(database.url(), 5432).await).await);
    let store =
        PostgresStore::connect_with_timeout(&proxy.url_through(database.url()), STORE_TIMEOUT)
            .await
            .expect("connect through the proxy");
    store.migrate().await.expect("migrate");
    let setup = Setup {
        store: Some(Arc::new(store)),
        ..Setup::default()
    };
    let case_proxy = proxy.clone();
    // The database is dropped whatever the case's outcome.
    let outcome = AssertUnwindSafe(run_setup(target, Backend::Postgres, setup, move |app| {
        postgres_case(app, case_proxy)
    }))
    .catch_unwind()
    .await;
    database.drop_database().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

async fn postgres_case(app: TestApp, proxy: Arc<FaultProxy>) {
    let target = app.target;
    app.register_verified(EMAIL).await;
    app.login(EMAIL, PASSWORD).await;
    readiness(&app, 200).await.expect(200);

    // Accepting and closing at once: every request is a 503 with Retry-After, never a 500.
    proxy.set(Fault::Refuse);
    let mut refused = Phase::default();
    for _ in 0..10 {
        assert_unavailable(&refused.send(&app, PASSWORD).await);
    }
    refused.print(target, "PostgreSQL refusing");
    assert_unavailable(&readiness(&app, 503).await);

    recover(&app, &proxy, target, "PostgreSQL back after refusing").await;

    // Hung: the first calls wait for the store timeout, open the breaker, and the rest are
    // answered without reaching the store at all.
    proxy.set(Fault::Blackhole);
    let mut opening = Phase::default();
    for _ in 0..FAILURES_TO_OPEN {
        assert_unavailable(&opening.send(&app, PASSWORD).await);
    }
    opening.print(target, "PostgreSQL hung, opening the breaker");
    let connections_before = proxy.accepted();
    let mut open = Phase::default();
    for _ in 0..HUNG_REQUESTS {
        assert_unavailable(&open.send(&app, PASSWORD).await);
    }
    // Readiness reports the store down while the breaker is open.
    assert_unavailable(&readiness(&app, 503).await);
    open.print(target, "PostgreSQL hung, breaker open");
    // Without the breaker each request would open a connection and wait out the store
    // timeout; with it only the background ping (one a second at most) reaches the store.
    let connections = proxy.accepted() - connections_before;
    assert!(
        connections < HUNG_REQUESTS / 2,
        "{connections} connections for {HUNG_REQUESTS} requests while the breaker is open"
    );

    recover(&app, &proxy, target, "PostgreSQL back after hanging").await;
    readiness(&app, 200).await.expect(200);
}

/// Lets the store through again; every answer until it is seen back is a 503 with
/// Retry-After, and then a login succeeds.
async fn recover(app: &TestApp, proxy: &FaultProxy, target: Target, name: &str) {
    proxy.set(Fault::Pass);
    let mut recovering = Phase::default();
    for _ in 0..RECOVERY_ATTEMPTS {
        let response = recovering.send(app, PASSWORD).await;
        if response.status.as_u16() == 201 {
            recovering.print(target, name);
            return;
        }
        assert_unavailable(&response);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    recovering.print(target, name);
    panic!("{name}: no login succeeded after {RECOVERY_ATTEMPTS} attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_postgres_refused_hung_and_back() {
    postgres_faults(Target::Bare).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axum_postgres_refused_hung_and_back() {
    postgres_faults(Target::Axum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actix_postgres_refused_hung_and_back() {
    postgres_faults(Target::Actix).await;
}

async fn redis_faults(target: Target) {
    let Some(url) = redis_url() else {
        return;
    };
    let proxy = Arc::new(FaultProxy::start(upstream_of(&url, 6379).await).await);
    let limits: Arc<dyn RateLimitStore> = Arc::new(
        RedisRateLimitStore::from_url(
            &proxy.url_through(&url),
            format!("aggfaults:{}:", uuid::Uuid::new_v4().simple()),
            RedisRateLimitStore::DEFAULT_TIMEOUT,
        )
        .expect("Redis store"),
    );
    let setup = Setup {
        policies: PolicyTable::builtin(),
        rate_limit_store: Some(limits),
        ..Setup::default()
    };
    let case_proxy = proxy.clone();
    run_setup(target, Backend::Sqlite, setup, move |app| {
        redis_case(app, case_proxy)
    })
    .await;
}

/// The bucket's capacity and what is left of it, from the rate-limit headers.
fn bucket(response: &TestResponse) -> (u64, u64) {
    let number = |name| {
        response
            .header(name)
            .and_then(|value| value.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} on a limited endpoint"))
    };
    (number("x-ratelimit-limit"), number("x-ratelimit-remaining"))
}

async fn redis_case(app: TestApp, proxy: Arc<FaultProxy>) {
    let target = app.target;
    let wrong = "Wrong-passw0rd!";
    let mut reachable = Phase::default();
    let response = reachable.send(&app, wrong).await;
    response.expect_problem(401, "unauthorized");
    let (limit, remaining) = bucket(&response);
    assert!(remaining < limit, "the check counted");
    reachable.print(target, "Redis reachable");

    for (fault, name) in [
        (Fault::Refuse, "Redis refusing"),
        (Fault::Blackhole, "Redis hung"),
    ] {
        proxy.set(fault);
        let mut phase = Phase::default();
        // More than the login policy allows: fail-open lets every one through.
        for _ in 0..limit + 3 {
            let response = phase.send(&app, wrong).await;
            response.expect_problem(401, "unauthorized");
            assert_eq!(
                bucket(&response),
                (limit, limit),
                "fail-open reports a full bucket"
            );
        }
        phase.print(target, name);
        assert_unavailable(&readiness(&app, 503).await);
    }

    proxy.set(Fault::Pass);
    let mut recovering = Phase::default();
    for attempt in 0..RECOVERY_ATTEMPTS {
        let response = recovering.send(&app, wrong).await;
        assert!(response.status.is_client_error(), "{}", response.status);
        if bucket(&response).1 < limit {
            recovering.print(target, "Redis back");
            readiness(&app, 200).await.expect(200);
            return;
        }
        assert!(attempt + 1 < RECOVERY_ATTEMPTS, "limiting never resumed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_redis_refused_hung_and_back() {
    redis_faults(Target::Bare).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axum_redis_refused_hung_and_back() {
    redis_faults(Target::Axum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actix_redis_refused_hung_and_back() {
    redis_faults(Target::Actix).await;
}
