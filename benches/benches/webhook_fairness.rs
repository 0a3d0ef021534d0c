//! Webhooks: fair delivery. One user's ten endpoints never answer (they accept the connection
//! and hold it: every attempt waits for the 15 s request timeout) while that user keeps
//! raising events: a backlog of 50 events (500 deliveries) queued at the start, then one
//! event (ten deliveries) every second through the API, about 600 deliveries a minute. Each
//! iteration measures another user's event from the start of its revoking request to the
//! receipt of its delivery on a loopback receiver. Delivery runs as a host runs it (the jobs
//! spawned, default settings). Store: SQLite in a temporary file, and PostgreSQL when
//! `AGG_BENCH_DATABASE_URL` names a server.
//!
//! `cargo bench -p aggregation-benches --bench webhook_fairness`. Besides criterion's mean,
//! the run prints the distribution (median, p95, max) of every measured delivery, the figure
//! the target is about: another user's delivery within 2 s.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aggregation_benches::{Arrivals, seed_sessions, serve_arrivals_receiver};
use aggregation_benches::{access_token, call, config, json_request, on_each_backend, runtime};
use aggregation_core::crypto::Keyring;
use aggregation_core::events::SessionRevoked;
use aggregation_core::jobs::JobsHandle;
use aggregation_core::store::{RevokedSessions, Store, now};
use aggregation_core::{AggregationService, Config};
use bytes::Bytes;
use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use http::Method;
use http_body_util::Full;
use uuid::Uuid;

/// Endpoints of the user whose endpoints never answer (the most a user may register).
const HANGING_ENDPOINTS: usize = 10;
/// Events of that user queued before the clock starts.
const BACKLOG_EVENTS: usize = 50;
/// Time between two of that user's events while the bench runs.
const LOAD_SPACING: Duration = Duration::from_secs(1);
/// The longest wait for one measured delivery.
const CEILING: Duration = Duration::from_secs(60);
const HOSTILE_EMAIL: &str = "hanging@bench.example";
const PATIENT_EMAIL: &str = "patient@bench.example";

/// An endpoint that accepts connections (counted in `accepted`) and never answers; its URL.
/// The connections stay open (held by the task) until the runtime ends.
async fn serve_hanging(accepted: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            accepted.fetch_add(1, Ordering::Relaxed);
            held.push(stream);
        }
    });
    format!("http://{address}/hooks")
}

fn bench_config() -> Config {
    config()
        .with_keyring(Keyring::new(vec![("bench".into(), vec![5; 32])]).expect("key"))
        .with_webhook_allow_private(true)
}

fn authorized(mut request: http::Request<Full<Bytes>>, access: &str) -> http::Request<Full<Bytes>> {
    request.headers_mut().insert(
        http::header::AUTHORIZATION,
        format!("Bearer {access}").parse().expect("header"),
    );
    request
}

/// `DELETE /api/v1/sessions/{id}` as the session's user: one `session.revoked` event.
async fn revoke(service: &AggregationService, access: &str, id: Uuid) {
    let request = authorized(
        http::Request::builder()
            .method(Method::DELETE)
            .uri(format!("/api/v1/sessions/{id}"))
            .body(Full::new(Bytes::new()))
            .expect("request"),
        access,
    );
    let (status, _) = call(service, request).await;
    assert_eq!(status, 204, "revoked");
}

/// Registers a webhook of the caller at `url`.
async fn register(service: &AggregationService, access: &str, url: &str) {
    let request = authorized(
        json_request(
            Method::POST,
            "/api/v1/webhooks",
            &serde_json::json!({ "url": url, "event_types": ["session.revoked"] }),
        ),
        access,
    );
    let (status, _) = call(service, request).await;
    assert_eq!(status, 201, "webhook registered");
}

async fn user_id(store: &dyn Store, email: &str) -> Uuid {
    store
        .user_by_email(email)
        .await
        .expect("store")
        .expect("the user")
        .id
}

struct Fixture {
    service: AggregationService,
    store: Arc<dyn Store>,
    patient_id: Uuid,
    patient_access: String,
    arrivals: Arrivals,
    /// Every measured latency, for the distribution.
    latencies: Mutex<Vec<Duration>>,
    /// Connections the hanging endpoints accepted (attempts that got no answer).
    hanging_attempts: Arc<AtomicUsize>,
    /// When the load started.
    started: Instant,
    /// The hanging user's steady events; stopped with the fixture.
    load: tokio::task::JoinHandle<()>,
    /// The running jobs, as a host starts them; dropped (stopped) with the fixture.
    _jobs: JobsHandle,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.load.abort();
    }
}

/// A service over `store` with its jobs running, the hanging user under load, and the
/// patient user whose webhook points at a fresh receiver.
async fn fixture(store: Arc<dyn Store>) -> Fixture {
    let (service, mailer) = aggregation_benches::service_sharing(store.clone(), bench_config());
    let hostile_access = access_token(&service, &mailer, HOSTILE_EMAIL).await;
    let hanging_attempts = Arc::new(AtomicUsize::new(0));
    for _ in 0..HANGING_ENDPOINTS {
        register(
            &service,
            &hostile_access,
            &serve_hanging(hanging_attempts.clone()).await,
        )
        .await;
    }
    let hostile_id = user_id(store.as_ref(), HOSTILE_EMAIL).await;
    let patient_access = access_token(&service, &mailer, PATIENT_EMAIL).await;
    let arrivals = Arrivals::default();
    register(
        &service,
        &patient_access,
        &serve_arrivals_receiver(arrivals.clone()).await,
    )
    .await;
    let patient_id = user_id(store.as_ref(), PATIENT_EMAIL).await;

    let jobs = service.jobs().spawn();
    let started = Instant::now();
    // The backlog: 500 deliveries due at once.
    for id in seed_sessions(store.as_ref(), hostile_id, BACKLOG_EVENTS).await {
        let at = now();
        let raise = |revoked: &RevokedSessions| {
            SessionRevoked::each(revoked.user_id, &revoked.session_ids, "bench", at)
        };
        store
            .revoke_session(hostile_id, id, "bench", at, &raise, &mut Vec::new())
            .await
            .expect("revoke");
    }
    // Then one more event every second, committed through the API (each wakes delivery).
    let steady = seed_sessions(store.as_ref(), hostile_id, 300).await;
    let load = {
        let service = service.clone();
        tokio::spawn(async move {
            let mut pace = tokio::time::interval(LOAD_SPACING);
            for id in steady {
                pace.tick().await;
                revoke(&service, &hostile_access, id).await;
            }
        })
    };
    // Let the hanging endpoints fill their slots before measuring.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Fixture {
        service,
        store,
        patient_id,
        patient_access,
        arrivals,
        latencies: Mutex::default(),
        hanging_attempts,
        started,
        load,
        _jobs: jobs,
    }
}

/// One patient event from its revoking request to the receipt of its delivery.
async fn one_delivery(fixture: &Fixture, session: Uuid) -> Duration {
    let key = session.to_string();
    let start = Instant::now();
    revoke(&fixture.service, &fixture.patient_access, session).await;
    let deadline = start + CEILING;
    loop {
        if let Some(arrived) = fixture.arrivals.lock().expect("arrivals").get(&key) {
            let latency = arrived.saturating_duration_since(start);
            fixture.latencies.lock().expect("latencies").push(latency);
            return latency;
        }
        assert!(Instant::now() < deadline, "no delivery within {CEILING:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The `q`-quantile (nearest rank) of sorted durations.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((sorted.len() as f64) * q).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

#[expect(clippy::print_stdout, reason = "the report is the benchmark's output")]
fn report(line: &str) {
    println!("{line}");
}

fn bench_backend(
    c: &mut Criterion,
    name: &str,
    runtime: &tokio::runtime::Runtime,
    fixture: &Fixture,
) {
    let mut group = c.benchmark_group(format!("webhook_fairness_{name}"));
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    // Long enough for the hanging attempts to time out (15 s) and their retries to come due.
    group.measurement_time(Duration::from_secs(40));
    group.bench_function("other_user_delivery_beside_10_hanging_endpoints", |b| {
        b.to_async(runtime).iter_custom(|iterations| async move {
            // Created before the clock starts.
            let sessions = seed_sessions(
                fixture.store.as_ref(),
                fixture.patient_id,
                usize::try_from(iterations).expect("iterations"),
            )
            .await;
            let mut total = Duration::ZERO;
            for session in sessions {
                total += one_delivery(fixture, session).await;
            }
            total
        });
    });
    group.finish();
    let mut latencies = fixture.latencies.lock().expect("latencies").clone();
    latencies.sort_unstable();
    if !latencies.is_empty() {
        report(&format!(
            "webhook_fairness/{name}: {} deliveries of another user beside {HANGING_ENDPOINTS} \
             hanging endpoints under load: median {}, p95 {}, max {} ({} attempts at the \
             hanging endpoints in {:.0} s)",
            latencies.len(),
            millis(quantile(&latencies, 0.5)),
            millis(quantile(&latencies, 0.95)),
            millis(quantile(&latencies, 1.0)),
            fixture.hanging_attempts.load(Ordering::Relaxed),
            fixture.started.elapsed().as_secs_f64(),
        ));
    }
}

fn webhook_fairness(c: &mut Criterion) {
    let runtime = runtime();
    on_each_backend(&runtime, fixture, |name, fixture| {
        bench_backend(c, name, &runtime, fixture);
    });
}

criterion_group!(benches, webhook_fairness);
criterion_main!(benches);
