//! Webhooks: events per second from the outbox to a local receiver. Each iteration revokes
//! `EVENTS` sessions (one `session.revoked` event each, written with its webhook delivery in
//! the revocation's transaction) and runs `deliver_webhooks` until a receiver on a loopback
//! socket has answered every delivery (signed POSTs, 2xx). Store: SQLite in a temporary file,
//! and PostgreSQL when `AGG_BENCH_DATABASE_URL` names a server.
//!
//! `cargo bench -p aggregation-benches --bench webhooks`. The sessions are created before the
//! clock starts; the time covers writing the events and delivering them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aggregation_benches::{
    access_token, call, config, json_request, on_each_backend, runtime, seed_sessions,
};
use aggregation_core::crypto::Keyring;
use aggregation_core::events::SessionRevoked;
use aggregation_core::jobs::{DELIVER_WEBHOOKS, RunOutcome};
use aggregation_core::store::{RevokedSessions, Store, now};
use aggregation_core::{AggregationService, Config};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use http::Method;
use uuid::Uuid;

/// Events per iteration: two claims' worth of deliveries.
const EVENTS: usize = 400;
const EMAIL: &str = "webhooks@bench.example";

/// A receiver on a loopback socket that answers every POST with 204 and counts them; its URL.
async fn serve_receiver(count: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    let app = axum::Router::new().route(
        "/hooks",
        axum::routing::post(move || {
            let count = count.clone();
            async move {
                count.fetch_add(1, Ordering::Relaxed);
                http::StatusCode::NO_CONTENT
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{address}/hooks")
}

fn bench_config() -> Config {
    config()
        .with_keyring(Keyring::new(vec![("bench".into(), vec![5; 32])]).expect("key"))
        .with_webhook_allow_private(true)
}

struct Fixture {
    service: AggregationService,
    store: Arc<dyn Store>,
    user_id: Uuid,
    received: Arc<AtomicUsize>,
}

/// A service over `store` with a user whose webhook points at a fresh receiver.
async fn fixture(store: Arc<dyn Store>) -> Fixture {
    let (service, mailer) = aggregation_benches::service_sharing(store.clone(), bench_config());
    let access = access_token(&service, &mailer, EMAIL).await;
    let received = Arc::new(AtomicUsize::new(0));
    let url = serve_receiver(received.clone()).await;
    let mut request = json_request(
        Method::POST,
        "/api/v1/webhooks",
        &serde_json::json!({ "url": url, "event_types": ["session.revoked"] }),
    );
    request.headers_mut().insert(
        http::header::AUTHORIZATION,
        format!("Bearer {access}").parse().expect("header"),
    );
    let (status, _) = call(&service, request).await;
    assert_eq!(status, 201, "webhook registered");
    let user_id = store
        .user_by_email(EMAIL)
        .await
        .expect("store")
        .expect("the user")
        .id;
    Fixture {
        service,
        store,
        user_id,
        received,
    }
}

/// Creates `count` live sessions of the user; their ids.
async fn sessions(fixture: &Fixture, count: usize) -> Vec<Uuid> {
    seed_sessions(fixture.store.as_ref(), fixture.user_id, count).await
}

/// Writes one event per session and delivers them all; the time it took.
async fn round(fixture: &Fixture) -> Duration {
    let ids = sessions(fixture, EVENTS).await;
    let target = fixture.received.load(Ordering::Relaxed) + EVENTS;
    let runner = fixture.service.jobs();
    let started = Instant::now();
    for id in ids {
        let at = now();
        let raise = |revoked: &RevokedSessions| {
            SessionRevoked::each(revoked.user_id, &revoked.session_ids, "bench", at)
        };
        fixture
            .store
            .revoke_session(fixture.user_id, id, "bench", at, &raise, &mut Vec::new())
            .await
            .expect("revoke");
    }
    while fixture.received.load(Ordering::Relaxed) < target {
        let outcome = runner.run_once(DELIVER_WEBHOOKS).await.expect("job");
        assert!(matches!(outcome, RunOutcome::Succeeded(_)), "{outcome}");
    }
    started.elapsed()
}

fn bench_backend(
    c: &mut Criterion,
    name: &str,
    runtime: &tokio::runtime::Runtime,
    fixture: &Fixture,
) {
    let mut group = c.benchmark_group(format!("webhooks_{name}"));
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("outbox_to_delivered_400_events", |b| {
        b.to_async(runtime).iter_custom(|iterations| async move {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                total += round(fixture).await;
            }
            total
        });
    });
    group.finish();
}

fn webhooks(c: &mut Criterion) {
    let runtime = runtime();
    on_each_backend(&runtime, fixture, |name, fixture| {
        bench_backend(c, name, &runtime, fixture);
    });
}

criterion_group!(benches, webhooks);
criterion_main!(benches);
