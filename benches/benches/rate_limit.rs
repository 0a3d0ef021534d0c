//! The rate-limit check: in process (one hot key, and many keys) and through Redis
//! (`AGG_BENCH_REDIS_URL`, e.g. redis://127.0.0.1:6379; skipped when unset). Compare the Redis
//! figure with `benches/redis-baseline.sh`, which runs `redis-benchmark` on a comparable script.

use std::sync::Arc;
use std::time::Duration;

use aggregation_core::rate_limit::{
    BucketPolicy, InMemoryRateLimitStore, RateLimitStore, RedisRateLimitStore,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn in_process(c: &mut Criterion) {
    let store = InMemoryRateLimitStore::new();
    // A bucket that never runs dry, so every check takes the same path.
    let policy = BucketPolicy::new(1e12, 1e12, 1).expect("policy");
    let keys: Vec<String> = (0..10_000)
        .map(|index| {
            format!(
                "rl:ip:10.0.{}.{}:POST:/api/v1/sessions",
                index / 256,
                index % 256
            )
        })
        .collect();
    let mut group = c.benchmark_group("rate_limit_in_process");
    group.throughput(Throughput::Elements(1));
    group.bench_function("check_hot_key", |b| {
        b.iter(|| store.check_now(&keys[0], &policy));
    });
    let mut next = 0;
    group.bench_function("check_10k_keys", |b| {
        b.iter(|| {
            next = (next + 1) % keys.len();
            store.check_now(&keys[next], &policy)
        });
    });
    group.finish();
}

fn redis(c: &mut Criterion) {
    let Some(url) = std::env::var("AGG_BENCH_REDIS_URL").ok() else {
        eprintln!("skipping Redis benchmark: AGG_BENCH_REDIS_URL is not set");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let store: Arc<dyn RateLimitStore> = Arc::new(
        RedisRateLimitStore::from_url(&url, "aggbench:".to_owned(), Duration::from_secs(1))
            .expect("redis store"),
    );
    let policy = BucketPolicy::new(1e12, 1e12, 1).expect("policy");
    let mut group = c.benchmark_group("rate_limit_redis");
    group.throughput(Throughput::Elements(1));
    group.bench_function("check_sequential", |b| {
        b.to_async(&runtime).iter(|| async {
            store
                .check("rl:ip:bench:POST:/api/v1/sessions", &policy)
                .await
        });
    });
    // 16 checks in flight at once over the one multiplexed connection.
    group.throughput(Throughput::Elements(16));
    group.bench_function("check_16_concurrent", |b| {
        b.to_async(&runtime).iter(|| async {
            let checks = (0..16).map(|index| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .check(
                            &format!("rl:ip:bench{index}:POST:/api/v1/sessions"),
                            &policy,
                        )
                        .await
                })
            });
            futures_util::future::join_all(checks).await
        });
    });
    group.finish();
}

criterion_group!(benches, in_process, redis);
criterion_main!(benches);
