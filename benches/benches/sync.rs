//! Provider sync: a whole-connection sync (`POST /api/v1/providers/{id}/sync`, forced) of the
//! sandbox's two accounts with 5,000 transactions in one of them, through the bare service into
//! SQLite (a temporary file) and, when `AGG_BENCH_DATABASE_URL` names a PostgreSQL server, into a
//! database created for the run; side by side with the provider's own fetch of the same
//! transactions over HTTP, so the ratio shows what matching and storing add to the fetch.
//!
//! `cargo bench -p aggregation-benches --bench sync`. After the first sync every row is
//! unchanged, so the iterations measure the steady state of a scheduled re-sync.

use std::time::Duration;

use aggregation_benches::{BenchDatabase, access_token, call, config, json_request};
use aggregation_core::AggregationService;
use aggregation_core::crypto::Keyring;
use aggregation_core::mail::MemoryMailer;
use aggregation_core::providers::{DateRange, Provider, SchwabProvider};
use aggregation_core::rate_limit::PolicyTable;
use aggregation_core::store::{SqliteStore, Store};
use aggregation_sandbox::SchwabSandbox;
use chrono::{TimeDelta, Utc};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use http::Method;
use rust_decimal::Decimal;

/// Transactions added to the sandbox's margin account.
const TRANSACTIONS: u64 = 5_000;
const REDIRECT_URI: &str = "https://bench.example/connected";

/// Serves the sandbox on a loopback socket; its base URL.
async fn serve_sandbox(sandbox: SchwabSandbox) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    let app = axum::Router::new().fallback_service(sandbox);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{address}")
}

fn query_param(url: &str, name: &str) -> Option<String> {
    url.split_once('?')?
        .1
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

/// A service over `store` offering the sandbox, a connected user, and the sync request path.
async fn connected(
    store: impl Store,
    sandbox: &SchwabSandbox,
    base: &str,
) -> (AggregationService, String, String) {
    let keyring = Keyring::new(vec![("bench".into(), vec![3; 32])]).expect("key");
    let config = config()
        .with_keyring(keyring)
        .with_oauth_redirect_uris(vec![REDIRECT_URI.to_owned()]);
    let mailer = MemoryMailer::new();
    let provider = SchwabProvider::new(sandbox.config(base.to_owned())).expect("provider");
    let service = AggregationService::builder(config)
        .store(store)
        .mailer(mailer.clone())
        .rate_limit_policies(PolicyTable::disabled())
        .provider(provider)
        .build()
        .expect("service");
    let token = access_token(&service, &mailer, "sync@example.com").await;
    let mut start = json_request(
        Method::POST,
        "/api/v1/providers",
        &serde_json::json!({"provider_slug": "schwab-sandbox"}),
    );
    start.headers_mut().insert(
        http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().expect("header"),
    );
    let (status, started) = call(&service, start).await;
    assert_eq!(status, 201, "connect");
    let url = started["authorization_url"].as_str().expect("url");
    let challenge = query_param(url, "code_challenge");
    let code = sandbox.issue_code(REDIRECT_URI, challenge.as_deref());
    let state = started["state"].as_str().expect("state");
    let callback = http::Request::builder()
        .method(Method::POST)
        .uri(format!(
            "/api/v1/providers/callback?code={code}&state={state}"
        ))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .expect("request");
    let (status, connection) = call(&service, callback).await;
    assert_eq!(status, 201, "callback: {connection}");
    let path = format!(
        "/api/v1/providers/{}/sync",
        connection["id"].as_str().expect("id")
    );
    (service, token, path)
}

fn sync_request(token: &str, path: &str) -> http::Request<http_body_util::Full<bytes::Bytes>> {
    let mut request = json_request(Method::POST, path, &serde_json::json!({"force": true}));
    request.headers_mut().insert(
        http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().expect("header"),
    );
    request
}

fn bench_sync(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let sandbox = SchwabSandbox::new();
    for id in 0..TRANSACTIONS {
        let cents = i64::try_from(id % 10_000).unwrap_or_default() + 1;
        sandbox.add_transaction(0, 9_000_000 + id, Decimal::new(cents, 2), "Bench deposit");
    }
    let base = runtime.block_on(serve_sandbox(sandbox.clone()));

    let mut group = c.benchmark_group("sync");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(TRANSACTIONS));

    // The provider's fetch alone: every transaction of the margin account over HTTP.
    let provider = SchwabProvider::new(sandbox.config(base.clone())).expect("provider");
    let code = sandbox.issue_code(REDIRECT_URI, None);
    let tokens = runtime
        .block_on(provider.exchange_code(&code, REDIRECT_URI, None))
        .expect("tokens");
    let account = sandbox
        .account_hashes()
        .into_iter()
        .next()
        .expect("account");
    let today = Utc::now().date_naive();
    let range = DateRange {
        start: today - TimeDelta::days(90),
        end: today,
    };
    group.bench_function("provider_fetch", |b| {
        b.to_async(&runtime).iter(|| async {
            let fetched = provider
                .transactions(&tokens, &account, range)
                .await
                .expect("fetch");
            assert!(fetched.items.len() as u64 >= TRANSACTIONS);
        });
    });

    let folder = tempfile::tempdir().expect("temporary folder");
    let url = format!(
        "sqlite://{}?mode=rwc",
        folder.path().join("sync.db").display()
    );
    let store = runtime.block_on(async {
        let store = SqliteStore::connect(&url).await.expect("SQLite");
        store.migrate().await.expect("migrate");
        store
    });
    let (service, token, path) = runtime.block_on(connected(store, &sandbox, &base));
    group.bench_function("connection_sqlite", |b| {
        b.to_async(&runtime).iter(|| async {
            let (status, body) = call(&service, sync_request(&token, &path)).await;
            assert_eq!(status, 201, "{body}");
        });
    });

    if let Ok(admin_url) = std::env::var("AGG_BENCH_DATABASE_URL") {
        let (database, store) = runtime.block_on(BenchDatabase::create(&admin_url));
        let (service, token, path) = runtime.block_on(connected(store, &sandbox, &base));
        group.bench_function("connection_postgres", |b| {
            b.to_async(&runtime).iter(|| async {
                let (status, body) = call(&service, sync_request(&token, &path)).await;
                assert_eq!(status, 201, "{body}");
            });
        });
        drop(service);
        runtime.block_on(database.drop_database());
    }
    group.finish();
}

criterion_group!(benches, bench_sync);
criterion_main!(benches);
