//! Sessions: revoking every session of a user at once (what `DELETE /api/v1/sessions` and a
//! password reset do), with 50 and 500 live sessions, through the store. The user has a
//! webhook endpoint for `session.revoked`, so the revocation's transaction also writes one
//! event and one queued delivery per session. Store: SQLite in a temporary file, and
//! PostgreSQL when `AGG_BENCH_DATABASE_URL` names a server.
//!
//! `cargo bench -p aggregation-benches --bench sessions`. Only the revocation is timed: the
//! endpoint and the sessions are created before it, and what it wrote is deleted after it, so
//! every iteration starts from the same, nearly empty, tables.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aggregation_benches::{on_each_backend, runtime, seed_sessions};
use aggregation_core::store::{NewUser, NewWebhookEndpoint, Store, now};
use chrono::TimeDelta;
use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use uuid::Uuid;

/// Live sessions revoked per iteration.
const SIZES: [usize; 2] = [50, 500];

struct Fixture {
    store: Arc<dyn Store>,
    user_id: Uuid,
}

/// A user of `store`, whose sessions each iteration creates and revokes.
async fn fixture(store: Arc<dyn Store>) -> Fixture {
    let user_id = Uuid::now_v7();
    let email = format!("{user_id}@bench.example");
    let user = NewUser {
        id: user_id,
        email: email.clone(),
        email_normalized: email,
        password_hash: "unused".to_owned(),
        created_at: now(),
    };
    store.create_user(&user).await.expect("user");
    Fixture { store, user_id }
}

/// Creates the user's webhook endpoint for `session.revoked` and `count` live sessions; the
/// endpoint's id.
async fn prepare(fixture: &Fixture, count: usize) -> Uuid {
    let at = now();
    let endpoint = NewWebhookEndpoint {
        id: Uuid::now_v7(),
        user_id: fixture.user_id,
        // Never called: no delivery job runs.
        url: "http://127.0.0.1:9/hooks".to_owned(),
        event_types: vec!["session.revoked".to_owned()],
        encrypted_secret: vec![0; 28],
        secret_key_id: "bench".to_owned(),
        created_at: at,
    };
    let created = fixture
        .store
        .create_webhook_endpoint(&endpoint, 1)
        .await
        .expect("endpoint");
    assert!(created, "the previous iteration's endpoint was deleted");
    seed_sessions(fixture.store.as_ref(), fixture.user_id, count).await;
    endpoint.id
}

/// Deletes the endpoint with its deliveries, the revoked sessions with their tokens, and the
/// events.
async fn clean(fixture: &Fixture, endpoint_id: Uuid) {
    let deleted = fixture
        .store
        .delete_webhook_endpoint(fixture.user_id, endpoint_id)
        .await
        .expect("delete endpoint");
    assert!(deleted);
    let at = now();
    fixture.store.purge_expired(at, at).await.expect("purge");
    fixture
        .store
        .purge_events_before(at + TimeDelta::seconds(1))
        .await
        .expect("purge events");
}

/// Revokes `count` fresh sessions at once; the time the revocation took.
async fn round(fixture: &Fixture, count: usize) -> Duration {
    let endpoint_id = prepare(fixture, count).await;
    let started = Instant::now();
    let revoked = fixture
        .store
        .revoke_all_sessions(fixture.user_id, None, "bench", now())
        .await
        .expect("revoke");
    let elapsed = started.elapsed();
    assert_eq!(revoked.len(), count);
    clean(fixture, endpoint_id).await;
    elapsed
}

fn bench_backend(
    c: &mut Criterion,
    name: &str,
    runtime: &tokio::runtime::Runtime,
    fixture: &Fixture,
) {
    let mut group = c.benchmark_group(format!("sessions_{name}"));
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    // Few samples: each iteration first creates its sessions, untimed, which takes longer
    // than the revocation itself (the four cases run in under a minute on 2 cores).
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for size in SIZES {
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::new("revoke_all", size), &size, |b, &size| {
            b.to_async(runtime).iter_custom(|iterations| async move {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    total += round(fixture, size).await;
                }
                total
            });
        });
    }
    group.finish();
}

fn sessions(c: &mut Criterion) {
    let runtime = runtime();
    on_each_backend(&runtime, fixture, |name, fixture| {
        bench_backend(c, name, &runtime, fixture);
    });
}

criterion_group!(benches, sessions);
criterion_main!(benches);
