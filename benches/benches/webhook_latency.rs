//! Webhooks: how long an event waits between its commit and its receipt. A host's setup (the
//! service with its jobs spawned, webhook delivery at its default settings) and a user whose
//! webhook points at a receiver on a loopback socket; then `EVENTS` single session revocations
//! through the API, one every `SPACING` (each commits one `session.revoked` event with its
//! delivery), and for each the time from the start of the revoking request to the receipt of
//! its delivery (signed POST, answered 204). Store: SQLite in a temporary file, and PostgreSQL
//! when `AGG_BENCH_DATABASE_URL` names a server.
//!
//! `cargo bench -p aggregation-benches --bench webhook_latency`. Not a criterion benchmark:
//! it reports the distribution (median, p95, max) of one run, since a wait for a schedule is
//! not noise to average away. The sessions are created before the clock starts; the
//! revocations are paced rather than awaited one by one, so a run lasts about
//! `EVENTS * SPACING` whatever the latency.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aggregation_benches::{
    Arrivals, access_token, call, config, on_each_backend, runtime, seed_sessions,
    serve_arrivals_receiver,
};
use aggregation_core::crypto::Keyring;
use aggregation_core::jobs::JobsHandle;
use aggregation_core::store::Store;
use aggregation_core::{AggregationService, Config};
use bytes::Bytes;
use http::Method;
use http_body_util::Full;
use uuid::Uuid;

/// Events measured per backend.
const EVENTS: usize = 200;
/// Time between two revocations: far apart enough that each event travels alone.
const SPACING: Duration = Duration::from_millis(50);
/// The longest wait for the last delivery after the last revocation.
const CEILING: Duration = Duration::from_secs(60);
const EMAIL: &str = "latency@bench.example";

fn bench_config() -> Config {
    config()
        .with_keyring(Keyring::new(vec![("bench".into(), vec![5; 32])]).expect("key"))
        .with_webhook_allow_private(true)
}

struct Fixture {
    service: AggregationService,
    store: Arc<dyn Store>,
    user_id: Uuid,
    access: String,
    arrivals: Arrivals,
    /// The running jobs, as a host starts them; dropped (stopped) with the fixture.
    _jobs: JobsHandle,
}

fn authorized(mut request: http::Request<Full<Bytes>>, access: &str) -> http::Request<Full<Bytes>> {
    request.headers_mut().insert(
        http::header::AUTHORIZATION,
        format!("Bearer {access}").parse().expect("header"),
    );
    request
}

/// A service over `store` with its jobs running and a user whose webhook points at a fresh
/// receiver.
async fn fixture(store: Arc<dyn Store>) -> Fixture {
    let (service, mailer) = aggregation_benches::service_sharing(store.clone(), bench_config());
    let access = access_token(&service, &mailer, EMAIL).await;
    let arrivals = Arrivals::default();
    let url = serve_arrivals_receiver(arrivals.clone()).await;
    let request = authorized(
        aggregation_benches::json_request(
            Method::POST,
            "/api/v1/webhooks",
            &serde_json::json!({ "url": url, "event_types": ["session.revoked"] }),
        ),
        &access,
    );
    let (status, _) = call(&service, request).await;
    assert_eq!(status, 201, "webhook registered");
    let user_id = store
        .user_by_email(EMAIL)
        .await
        .expect("store")
        .expect("the user")
        .id;
    let jobs = service.jobs().spawn();
    Fixture {
        service,
        store,
        user_id,
        access,
        arrivals,
        _jobs: jobs,
    }
}

/// Creates `count` live sessions of the user; their ids.
async fn sessions(fixture: &Fixture, count: usize) -> Vec<Uuid> {
    seed_sessions(fixture.store.as_ref(), fixture.user_id, count).await
}

/// The `q`-quantile (nearest rank) of sorted durations.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((sorted.len() as f64) * q).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

/// Revokes the sessions one every `SPACING` and reports how long each delivery took.
async fn measure(name: &str, fixture: &Fixture) {
    let ids = sessions(fixture, EVENTS).await;
    let mut started = Vec::with_capacity(EVENTS);
    let mut requests = Vec::with_capacity(EVENTS);
    let mut pace = tokio::time::interval(SPACING);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for id in &ids {
        pace.tick().await;
        let request = authorized(
            http::Request::builder()
                .method(Method::DELETE)
                .uri(format!("/api/v1/sessions/{id}"))
                .body(Full::new(Bytes::new()))
                .expect("request"),
            &fixture.access,
        );
        let start = Instant::now();
        let (status, _) = call(&fixture.service, request).await;
        requests.push(start.elapsed());
        assert_eq!(status, 204, "revoked");
        started.push((id.to_string(), start));
    }
    let deadline = Instant::now() + CEILING;
    while fixture.arrivals.lock().expect("arrivals").len() < EVENTS {
        assert!(
            Instant::now() < deadline,
            "deliveries missing after {CEILING:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let arrivals = fixture.arrivals.lock().expect("arrivals").clone();
    let mut latencies: Vec<Duration> = started
        .iter()
        .map(|(id, start)| {
            arrivals
                .get(id)
                .expect("delivered")
                .saturating_duration_since(*start)
        })
        .collect();
    latencies.sort_unstable();
    requests.sort_unstable();
    let mean = latencies.iter().sum::<Duration>() / EVENTS as u32;
    report(&format!(
        "webhook_latency/{name}: {EVENTS} events {} apart, commit to receipt: median {}, \
         p95 {}, max {}, mean {} (the revoking request alone: median {})",
        millis(SPACING),
        millis(quantile(&latencies, 0.5)),
        millis(quantile(&latencies, 0.95)),
        millis(quantile(&latencies, 1.0)),
        millis(mean),
        millis(quantile(&requests, 0.5)),
    ));
}

#[expect(clippy::print_stdout, reason = "the report is the benchmark's output")]
fn report(line: &str) {
    println!("{line}");
}

fn main() {
    let runtime = runtime();
    on_each_backend(&runtime, fixture, |name, fixture| {
        runtime.block_on(measure(name, fixture));
    });
}
