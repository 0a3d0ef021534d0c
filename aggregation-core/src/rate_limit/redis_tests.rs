//! The Redis store failing: the limiter allows the request (fail-open), reports the
//! allowed check and logs the spec's fail-open record once per outage. Most cases need no
//! Redis (nothing listens on the ports used); the one that loses a working Redis reads
//! `AGG_TEST_REDIS_URL` and skips when it is unset.
#![cfg(feature = "redis")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::{
    BucketPolicy, PolicyTable, RateLimitEvent, RateLimitStore, RateLimitStoreError, RateLimiter,
    RecordingEvents, RedisRateLimitStore, RequestIdentity,
};

#[tokio::test]
async fn closed_port_errors_within_the_timeout_and_the_limiter_fails_open() {
    // Port 1 on loopback: nothing listens there. Needs no Redis.
    let store = RedisRateLimitStore::from_url(
        "redis://127.0.0.1:1",
        "agg:".to_owned(),
        RedisRateLimitStore::DEFAULT_TIMEOUT,
    )
    .unwrap();
    let policy = BucketPolicy::new(5.0, 5.0, 1).unwrap();
    for _ in 0..3 {
        let started = Instant::now();
        let result = store
            .check("rl:ip:192.0.2.1:POST:/api/v1/sessions", &policy)
            .await;
        let took = started.elapsed();
        assert!(result.is_err(), "{result:?}");
        assert!(took < Duration::from_millis(600), "took {took:?}");
    }

    let events = Arc::new(RecordingEvents::new());
    let limiter = RateLimiter::new(PolicyTable::builtin(), Arc::new(store), events.clone());
    let who = RequestIdentity {
        client_ip: Some("192.0.2.1".parse().unwrap()),
        ..RequestIdentity::default()
    };
    for _ in 0..7 {
        let d = limiter
            .check("POST", "/api/v1/sessions", "/api/v1/sessions", &who)
            .await
            .unwrap();
        assert!(d.allowed);
        assert_eq!((d.limit, d.remaining), (5, 5));
    }
    let events = events.take();
    assert_eq!(events.len(), 14);
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, RateLimitEvent::Denied { .. }))
    );
}

#[tokio::test]
async fn a_ping_to_a_closed_port_fails() {
    // Port 1 on loopback: nothing listens there. Needs no Redis.
    let store = RedisRateLimitStore::from_url(
        "redis://127.0.0.1:1",
        "agg:".to_owned(),
        RedisRateLimitStore::DEFAULT_TIMEOUT,
    )
    .unwrap();
    let result = store.ping().await;
    assert!(result.is_err(), "{result:?}");
}

/// Every `tracing` event of the thread, as field name → value.
#[derive(Clone, Default)]
struct CapturedLogs(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

struct Fields(BTreeMap<String, String>);

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl tracing::Subscriber for CapturedLogs {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(BTreeMap::new());
        fields
            .0
            .insert("level".to_owned(), event.metadata().level().to_string());
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// The logs of every test in this binary. Global, not per thread: a thread-local subscriber
/// can miss events whose call site another test's thread registered first.
fn captured_logs() -> &'static CapturedLogs {
    static LOGS: OnceLock<CapturedLogs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = CapturedLogs::default();
        // Fails only if a subscriber is already set, and this is the only place that sets one.
        let _ = tracing::subscriber::set_global_default(logs.clone());
        logs
    })
}

/// A server that accepts connections and never answers (a hung Redis, or a firewall that
/// completes the handshake): only the store's timeout can end a check. Needs no Redis.
#[tokio::test]
async fn silent_server_times_out_and_the_limiter_fails_open() {
    let logs = captured_logs();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    let silent = tokio::spawn(async move {
        // Held open, never read or written.
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });

    let store = RedisRateLimitStore::from_url(
        &format!("redis://127.0.0.1:{port}"),
        "agg:".to_owned(),
        RedisRateLimitStore::DEFAULT_TIMEOUT,
    )
    .unwrap();
    let policy = BucketPolicy::new(5.0, 5.0, 1).unwrap();
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let result = store
            .check("rl:ip:192.0.2.1:POST:/api/v1/sessions", &policy)
            .await;
        outcomes.push((result, started.elapsed()));
    }

    let events = Arc::new(RecordingEvents::new());
    let limiter = RateLimiter::new(PolicyTable::builtin(), Arc::new(store), events.clone());
    let who = RequestIdentity {
        client_ip: Some("198.51.100.77".parse().unwrap()),
        ..RequestIdentity::default()
    };
    let started = Instant::now();
    let decision = limiter
        .check("POST", "/api/v1/sessions", "/api/v1/sessions", &who)
        .await
        .unwrap();
    let took = started.elapsed();
    silent.abort();

    assert!(
        accepted.load(Ordering::SeqCst) >= 1,
        "the store never reached the silent server"
    );
    for (result, took) in outcomes {
        assert!(
            matches!(result, Err(RateLimitStoreError::Timeout(t)) if t == RedisRateLimitStore::DEFAULT_TIMEOUT),
            "{result:?}"
        );
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert!(decision.allowed);
    assert_eq!((decision.limit, decision.remaining), (5, 5));
    assert!(matches!(
        events.take().as_slice(),
        [
            RateLimitEvent::Attempted { .. },
            RateLimitEvent::Allowed { .. }
        ]
    ));
    let logs = logs.0.lock().unwrap().clone();
    let fail_open: Vec<_> = logs
        .iter()
        .filter(|fields| {
            fields.get("result").map(String::as_str) == Some("fail_open")
                && fields.get("identifier").map(String::as_str) == Some("198.51.100.77")
        })
        .collect();
    assert_eq!(fail_open.len(), 1, "{logs:?}");
    let entry = fail_open[0];
    // The outage's first failure, in full.
    assert_eq!(entry["level"], "ERROR");
    assert_eq!(entry["layer"], "rate_limit");
    assert_eq!(entry["endpoint"], "POST /api/v1/sessions");
    assert!(entry["error"].contains("did not answer"), "{entry:?}");
}

/// A TCP link to Redis that the test can cut (every connection closed, new ones closed as
/// soon as accepted, like a Redis that went away) and restore.
struct CuttableLink {
    address: std::net::SocketAddr,
    cut: Arc<std::sync::atomic::AtomicBool>,
    connections: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl CuttableLink {
    async fn start(upstream: (String, u16)) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (is_cut, held) = (cut.clone(), connections.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if is_cut.load(Ordering::SeqCst) {
                    continue;
                }
                let upstream = upstream.clone();
                held.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                }));
            }
        });
        Self {
            address,
            cut,
            connections,
            accepting,
        }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for connection in self.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for CuttableLink {
    fn drop(&mut self) {
        self.cut();
        self.accepting.abort();
    }
}

/// The fail-open records (and the outage's end) of the checks of `identifier`.
fn fail_open_records(logs: &CapturedLogs, identifier: &str) -> Vec<BTreeMap<String, String>> {
    logs.0
        .lock()
        .unwrap()
        .iter()
        .filter(|fields| {
            fields.get("result").map(String::as_str) == Some("fail_open")
                && fields.get("identifier").map(String::as_str) == Some(identifier)
        })
        .cloned()
        .collect()
}

/// A working Redis goes away: the first check that fails writes the spec's fail-open record
/// at ERROR, a second one moments later writes nothing, and the first check Redis answers
/// again ends the outage with one line.
#[tokio::test]
async fn losing_redis_logs_the_fail_open_record_once_per_outage() {
    let Some(url) = std::env::var("AGG_TEST_REDIS_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
    else {
        eprintln!("skipping: AGG_TEST_REDIS_URL is not set");
        return;
    };
    let logs = captured_logs();
    let upstream = match redis::Client::open(url.as_str())
        .unwrap()
        .get_connection_info()
        .addr()
    {
        redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
        other => panic!("a plain TCP Redis URL is needed, not {other:?}"),
    };
    let link = CuttableLink::start(upstream).await;
    let prefix = format!("agg-fail-open-{}:", uuid::Uuid::new_v4().simple());
    let store = RedisRateLimitStore::from_url(
        &format!("redis://{}", link.address),
        prefix,
        RedisRateLimitStore::DEFAULT_TIMEOUT,
    )
    .unwrap();
    let limiter = RateLimiter::new(
        PolicyTable::builtin(),
        Arc::new(store),
        Arc::new(RecordingEvents::new()),
    );
    let identifier = "203.0.113.41";
    let who = RequestIdentity {
        client_ip: Some(identifier.parse().unwrap()),
        ..RequestIdentity::default()
    };
    let check = || limiter.check("POST", "/api/v1/sessions", "/api/v1/sessions", &who);

    // Redis answers: a token is taken, nothing is logged.
    let reached = check().await.unwrap();
    assert_eq!((reached.limit, reached.remaining), (5, 4));
    assert!(fail_open_records(logs, identifier).is_empty());

    link.cut();
    let first = check().await.unwrap();
    assert!(first.allowed);
    assert_eq!(
        (first.limit, first.remaining),
        (5, 5),
        "fail-open: a full bucket"
    );
    let records = fail_open_records(logs, identifier);
    assert_eq!(records.len(), 1, "{records:#?}");
    let record = &records[0];
    assert_eq!(record["level"], "ERROR");
    assert_eq!(record["layer"], "rate_limit");
    assert_eq!(record["endpoint"], "POST /api/v1/sessions");
    assert!(!record["error"].is_empty(), "{record:?}");

    // Within 10 s of the first: allowed again, and nothing new in the log.
    let lines_before = logs.0.lock().unwrap().len();
    let second = check().await.unwrap();
    assert!(second.allowed);
    assert_eq!(second.remaining, 5);
    assert_eq!(fail_open_records(logs, identifier).len(), 1);
    let new_lines: Vec<_> = logs.0.lock().unwrap()[lines_before..]
        .iter()
        .filter(|fields| {
            fields
                .get("message")
                .is_some_and(|message| message.contains("rate-limit store outage"))
        })
        .cloned()
        .collect();
    assert!(new_lines.is_empty(), "{new_lines:#?}");

    // Redis back: the first answered check ends the outage, with one line.
    link.restore();
    let mut answered = false;
    for _ in 0..50 {
        if check().await.unwrap().remaining < 5 {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered, "Redis never answered again");
    let ended = logs
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|fields| {
            fields
                .get("message")
                .is_some_and(|message| message.contains("rate-limit store outage ended"))
        })
        .count();
    assert!(ended >= 1, "no line ended the outage");
}
