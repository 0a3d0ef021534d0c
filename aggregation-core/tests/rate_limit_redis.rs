//! `RedisRateLimitStore` against a real Redis: set `AGG_TEST_REDIS_URL`
//! (e.g. `redis://127.0.0.1:6379`); the tests that need it skip with a message when it is
//! unset. Each test uses its own random key prefix and deletes its keys at the end.
#![cfg(feature = "redis")]
#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail loudly, like the tests"
)]

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aggregation_core::rate_limit::{
    BucketPolicy, Decision, InMemoryRateLimitStore, ManualClock, RateLimitStore,
    RedisRateLimitStore,
};

fn redis_url(test: &str) -> Option<String> {
    match std::env::var("AGG_TEST_REDIS_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            eprintln!("skipping {test}: AGG_TEST_REDIS_URL is not set");
            None
        }
    }
}

fn random_prefix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let h = RandomState::new().hash_one((nanos, std::process::id()));
    format!("agg-test:{h:016x}:")
}

/// Delete every key under `prefix`; returns how many there were.
async fn cleanup(url: &str, prefix: &str) -> usize {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    if !keys.is_empty() {
        let _: i64 = redis::cmd("DEL")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    keys.len()
}

async fn ttl_of(url: &str, key: &str) -> i64 {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("TTL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

const GENEROUS: Duration = Duration::from_secs(5);

#[tokio::test]
async fn sequence_matches_the_in_memory_store_under_a_fake_clock() {
    let Some(url) = redis_url("sequence_matches_the_in_memory_store_under_a_fake_clock") else {
        return;
    };
    let prefix = random_prefix();
    let clock = ManualClock::new(1_700_000_000.25);
    let redis = RedisRateLimitStore::from_url(&url, prefix.clone(), GENEROUS)
        .unwrap()
        .with_client_clock(clock.clock());
    let memory = InMemoryRateLimitStore::with_clock(clock.clock());

    // (seconds to advance, max_tokens, refill per minute, cost)
    let steps: &[(f64, f64, f64, u32)] = &[
        (0.0, 3.0, 0.7, 1),
        (0.0, 3.0, 0.7, 1),
        (0.1, 3.0, 0.7, 1),
        (0.0, 3.0, 0.7, 1),
        (30.0, 3.0, 0.7, 1),
        (55.7, 3.0, 0.7, 1),
        (1.3, 3.0, 0.7, 2),
        (200.0, 3.0, 0.7, 2),
        (0.0, 3.0, 0.7, 1),
        (1_000.0, 3.0, 0.7, 3),
        (0.0, 3.0, 0.7, 1),
    ];
    let mut got: Vec<(Decision, Decision)> = Vec::new();
    let mut errors = Vec::new();
    for &(advance, max, rate, cost) in steps {
        clock.advance(advance);
        let policy = BucketPolicy::new(max, rate, cost).unwrap();
        let m = memory
            .check("rl:ip:192.0.2.1:POST:/api/v1/users", &policy)
            .await
            .unwrap();
        match redis
            .check("rl:ip:192.0.2.1:POST:/api/v1/users", &policy)
            .await
        {
            Ok(r) => got.push((r, m)),
            Err(e) => errors.push(e.to_string()),
        }
    }
    // The login policy's TTL is set on the key.
    let login = BucketPolicy::new(5.0, 5.0, 1).unwrap();
    let login_result = redis
        .check("rl:ip:192.0.2.1:POST:/api/v1/sessions", &login)
        .await;
    let ttl = ttl_of(
        &url,
        &format!("{prefix}rl:ip:192.0.2.1:POST:/api/v1/sessions"),
    )
    .await;
    let deleted = cleanup(&url, &prefix).await;

    assert!(errors.is_empty(), "{errors:?}");
    assert!(login_result.unwrap().allowed);
    assert!((115..=120).contains(&ttl), "TTL {ttl}");
    assert_eq!(deleted, 2);
    let mut saw_denial = false;
    for (i, (r, m)) in got.iter().enumerate() {
        assert_eq!(r, m, "step {i}");
        saw_denial |= !r.allowed;
    }
    assert!(saw_denial);
    assert_eq!(got.len(), steps.len());
}

#[tokio::test]
async fn server_clock_burst_matches_the_in_memory_store() {
    let Some(url) = redis_url("server_clock_burst_matches_the_in_memory_store") else {
        return;
    };
    let prefix = random_prefix();
    let redis = RedisRateLimitStore::from_url(&url, prefix.clone(), GENEROUS).unwrap();
    let memory = InMemoryRateLimitStore::new();
    let login = BucketPolicy::new(5.0, 5.0, 1).unwrap();
    let mut pairs = Vec::new();
    for _ in 0..7 {
        let r = redis.check("burst", &login).await;
        let m = memory.check("burst", &login).await.unwrap();
        pairs.push((r, m));
    }
    cleanup(&url, &prefix).await;
    for (i, (r, m)) in pairs.into_iter().enumerate() {
        let r = r.unwrap();
        assert_eq!(
            (r.allowed, r.limit, r.remaining),
            (m.allowed, m.limit, m.remaining),
            "request {i}"
        );
        // Both ran within a second or two: the waits agree to a second.
        assert!(
            (r.retry_after_secs - m.retry_after_secs).abs() < 1.0,
            "request {i}"
        );
        if i >= 5 {
            assert!(!r.allowed);
            assert_eq!(r.retry_after_header(), 12);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_one_bucket_under_concurrent_load() {
    let Some(url) = redis_url("two_instances_share_one_bucket_under_concurrent_load") else {
        return;
    };
    let prefix = random_prefix();
    let a: Arc<dyn RateLimitStore> =
        Arc::new(RedisRateLimitStore::from_url(&url, prefix.clone(), GENEROUS).unwrap());
    let b: Arc<dyn RateLimitStore> =
        Arc::new(RedisRateLimitStore::from_url(&url, prefix.clone(), GENEROUS).unwrap());
    // 10 tokens, refilled so slowly that none comes back during the test.
    let policy = BucketPolicy::new(10.0, 0.001, 1).unwrap();
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { store.check("rl:global:global:POST:/shared", &policy).await })
        })
        .collect();
    let mut allowed = 0;
    let mut errors = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(d) if d.allowed => allowed += 1,
            Ok(_) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    cleanup(&url, &prefix).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(allowed, 10);
}

#[test]
fn construction_needs_no_runtime_and_no_server() {
    let store = RedisRateLimitStore::from_url(
        "redis://127.0.0.1:1",
        "p:".into(),
        Duration::from_millis(50),
    )
    .unwrap();
    assert_eq!(store.key_prefix(), "p:");
    assert!(
        RedisRateLimitStore::from_url("not a url", String::new(), Duration::from_millis(50))
            .is_err()
    );
}

/// A `redis-server` this test starts on a free loopback port, killed on drop.
struct OwnServer {
    child: std::process::Child,
    port: u16,
}

impl OwnServer {
    fn start(port: u16) -> Option<Self> {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        Some(Self { child, port })
    }

    async fn wait_ready(&self) {
        for _ in 0..100 {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server on port {} did not start", self.port);
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Redis down at construction, then up, then stopped, then back: the store errors while it is
/// down and recovers by itself. Runs only where `redis-server` is on the PATH.
#[tokio::test]
async fn store_survives_redis_stopping_and_starting() {
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let store =
        RedisRateLimitStore::from_url(&url, random_prefix(), Duration::from_millis(300)).unwrap();
    let policy = BucketPolicy::new(100.0, 100.0, 1).unwrap();
    assert!(
        store.check("k", &policy).await.is_err(),
        "nothing listens yet"
    );

    let Some(server) = OwnServer::start(port) else {
        eprintln!("skipping store_survives_redis_stopping_and_starting: no redis-server on PATH");
        return;
    };
    server.wait_ready().await;
    let recovered = recover(&store, &policy).await;
    assert!(recovered, "store did not reconnect after Redis started");

    drop(server);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    assert!(store.check("k", &policy).await.is_err(), "Redis is stopped");
    assert!(started.elapsed() < Duration::from_secs(1));

    let server = OwnServer::start(port).unwrap();
    server.wait_ready().await;
    assert!(
        recover(&store, &policy).await,
        "store did not reconnect after a restart"
    );
    // A restarted server has no scripts: NOSCRIPT was answered by loading the script again.
    drop(server);
}

/// Retry for up to 5 s until a check succeeds.
async fn recover(store: &RedisRateLimitStore, policy: &BucketPolicy) -> bool {
    for _ in 0..50 {
        if store.check("k", policy).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn peek_matches_the_in_memory_store_and_changes_nothing() {
    let Some(url) = redis_url("peek_matches_the_in_memory_store_and_changes_nothing") else {
        return;
    };
    let prefix = random_prefix();
    let clock = ManualClock::new(1_700_000_000.5);
    let redis = RedisRateLimitStore::from_url(&url, prefix.clone(), GENEROUS)
        .unwrap()
        .with_client_clock(clock.clock());
    let memory = InMemoryRateLimitStore::with_clock(clock.clock());
    let policy = BucketPolicy::new(3.0, 1.0, 1).unwrap();
    let key = "rl:login_failures:abc";
    let mut pairs = Vec::new();
    // A missing bucket peeks full and is not created.
    pairs.push((
        redis.peek(key, &policy).await.unwrap(),
        memory.peek(key, &policy).await.unwrap(),
    ));
    let created_by_peek = cleanup(&url, &prefix).await;
    for advance in [0.0, 0.0, 0.0, 10.0, 50.0] {
        clock.advance(advance);
        redis.check(key, &policy).await.unwrap();
        memory.check(key, &policy).await.unwrap();
        for _ in 0..2 {
            pairs.push((
                redis.peek(key, &policy).await.unwrap(),
                memory.peek(key, &policy).await.unwrap(),
            ));
        }
    }
    // The peek leaves the TTL the check set.
    let ttl_before = ttl_of(&url, &format!("{prefix}{key}")).await;
    clock.advance(30.0);
    let late = redis.peek(key, &policy).await.unwrap();
    let late_memory = memory.peek(key, &policy).await.unwrap();
    let ttl_after = ttl_of(&url, &format!("{prefix}{key}")).await;
    // The server's clock works too.
    let server = RedisRateLimitStore::from_url(&url, prefix.clone(), GENEROUS).unwrap();
    let server_peek = server.peek("rl:unknown", &policy).await.unwrap();
    cleanup(&url, &prefix).await;

    assert_eq!(created_by_peek, 0);
    for (i, (r, m)) in pairs.iter().enumerate() {
        assert_eq!(r, m, "peek {i}");
    }
    assert!(pairs.iter().any(|(r, _)| !r.allowed));
    assert_eq!(late, late_memory);
    assert_eq!(late.retry_after_header(), 30);
    assert!(ttl_after <= ttl_before, "{ttl_before} -> {ttl_after}");
    assert!(server_peek.allowed);
    assert_eq!(server_peek.remaining, 3);
}

#[tokio::test]
async fn ping_answers_when_redis_does() {
    let Some(url) = redis_url("ping_answers_when_redis_does") else {
        return;
    };
    let store =
        RedisRateLimitStore::from_url(&url, random_prefix(), RedisRateLimitStore::DEFAULT_TIMEOUT)
            .unwrap();
    store.ping().await.unwrap();
}
