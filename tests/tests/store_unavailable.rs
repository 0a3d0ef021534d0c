//! A store that cannot be reached fails closed with 503 within the store timeout, never a hang.

use std::time::{Duration, Instant};

use aggregation_core::AggregationService;
use aggregation_core::mail::MemoryMailer;
use aggregation_core::store::{PostgresStore, SqliteStore, Store};
use aggregation_tests::PASSWORD;
use bytes::Bytes;
use http::{Method, Request, Response, header};
use http_body_util::{BodyExt as _, Full};
use tower::ServiceExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_database_is_503() {
    // Nothing listens on port 1: the pool gives up after its acquire timeout.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(1))
        .connect_lazy("postgres://postgres@127.0.0.1:1/unreachable")
        .expect("valid URL");
    let service = AggregationService::builder(aggregation_tests::test_config())
        .store(PostgresStore::new(pool))
        .mailer(MemoryMailer::new())
        .build()
        .expect("service");
    for (method, path, body) in [
        (
            Method::POST,
            "/api/v1/sessions",
            r#"{"email":"ada@example.com","password":"x"}"#,
        ),
        (Method::GET, "/health", ""),
        // Not ready either; see below for liveness.
        (Method::GET, "/health/ready", ""),
    ] {
        let started = Instant::now();
        let response = service
            .clone()
            .oneshot(
                Request::builder()
                    .method(method)
                    .uri(path)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from_static(body.as_bytes())))
                    .expect("request"),
            )
            .await
            .expect("infallible");
        assert_eq!(response.status().as_u16(), 503, "{path}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let problem: serde_json::Value = serde_json::from_slice(&body).expect("problem json");
        assert!(
            problem["type"]
                .as_str()
                .is_some_and(|kind| kind.ends_with("/errors/service_unavailable"))
        );
        // Nothing about the database leaks into the body.
        assert!(!String::from_utf8_lossy(&body).contains("127.0.0.1:1"));
    }
    // Liveness asks no dependency: the process still serves.
    let live = service
        .clone()
        .oneshot(
            Request::get("/health/live")
                .body(Full::new(Bytes::new()))
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(live.status().as_u16(), 200);
}

/// Short, so that the tests below are quick; what matters is that the answer comes after about
/// this long, not after a hang.
const STORE_TIMEOUT: Duration = Duration::from_millis(400);

fn service_over(store: impl Store) -> AggregationService {
    AggregationService::builder(aggregation_tests::test_config())
        .store(store)
        .mailer(MemoryMailer::new())
        .build()
        .expect("service")
}

async fn post(service: &AggregationService, path: &str, body: String) -> Response<Bytes> {
    let response = service
        .clone()
        .oneshot(
            Request::builder()
                .method(Method::POST)
                .uri(path)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body)))
                .expect("request"),
        )
        .await
        .expect("infallible");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    Response::from_parts(parts, body)
}

/// Asserts a 503 `service_unavailable` that came once the store timeout ran out, not before
/// and not much later.
#[track_caller]
fn assert_timed_out(response: &Response<Bytes>, elapsed: Duration) {
    assert_eq!(
        response.status().as_u16(),
        503,
        "{}",
        String::from_utf8_lossy(response.body())
    );
    let problem: serde_json::Value = serde_json::from_slice(response.body()).expect("problem");
    assert!(
        problem["type"]
            .as_str()
            .is_some_and(|kind| kind.ends_with("/errors/service_unavailable"))
    );
    assert!(elapsed >= STORE_TIMEOUT / 2, "answered after {elapsed:?}");
    assert!(
        elapsed < STORE_TIMEOUT + Duration::from_secs(3),
        "answered after {elapsed:?}"
    );
}

fn sqlite_file() -> (std::path::PathBuf, String) {
    let folder = std::env::temp_dir().join(format!(
        "aggregation-timeout-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&folder).expect("temporary folder");
    let url = format!("sqlite://{}?mode=rwc", folder.join("store.db").display());
    (folder, url)
}

async fn sqlite_store() -> (SqliteStore, std::path::PathBuf) {
    let (folder, url) = sqlite_file();
    let store = SqliteStore::connect_with_timeout(&url, STORE_TIMEOUT)
        .await
        .expect("open SQLite file");
    store.migrate().await.expect("migrate");
    (store, folder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_timeout_bounds_the_wait_for_a_connection() {
    let (store, folder) = sqlite_store().await;
    let service = service_over(store.clone());
    // Every pooled connection is busy elsewhere.
    let mut held = Vec::new();
    for _ in 0..store.pool().options().get_max_connections() {
        held.push(store.pool().acquire().await.expect("connection"));
    }
    let started = Instant::now();
    let response = post(
        &service,
        "/api/v1/sessions",
        r#"{"email":"ada@example.com","password":"x"}"#.to_owned(),
    )
    .await;
    assert_timed_out(&response, started.elapsed());
    drop(held);
    let _ = std::fs::remove_dir_all(folder);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_timeout_bounds_the_wait_for_a_write_lock() {
    let (store, folder) = sqlite_store().await;
    let service = service_over(store.clone());
    // Another writer holds the database's write lock and does not let go.
    let mut writer = store.pool().acquire().await.expect("connection");
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut *writer)
        .await
        .expect("take the write lock");
    let started = Instant::now();
    let response = post(
        &service,
        "/api/v1/users",
        format!(r#"{{"email":"ada@example.com","password":"{PASSWORD}"}}"#),
    )
    .await;
    assert_timed_out(&response, started.elapsed());
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut *writer)
        .await
        .expect("release the write lock");
    drop(writer);
    let _ = std::fs::remove_dir_all(folder);
}

/// Replaces the database of a PostgreSQL URL.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let authority = base.find("://").map_or(0, |index| index + 3);
    let host_end = base[authority..]
        .find('/')
        .map_or(base.len(), |index| authority + index);
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    format!("{}/{database}{query}", &base[..host_end])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_timeout_ends_a_hung_postgres_query() {
    let Some(admin_url) = aggregation_tests::postgres_url() else {
        eprintln!("skipping: AGG_TEST_DATABASE_URL is not set");
        return;
    };
    let name = format!("agg_test_{}", uuid::Uuid::new_v4().simple());
    let admin = sqlx::PgPool::connect(&admin_url).await.expect("admin");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin)
        .await
        .expect("create database");
    let url = with_database(&admin_url, &name);
    let store = PostgresStore::connect_with_timeout(&url, STORE_TIMEOUT)
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    let service = service_over(store.clone());
    // Another client locks the table a login reads (in the store's schema), so the login's
    // query hangs.
    let mut locker = sqlx::PgPool::connect(&url)
        .await
        .expect("connect")
        .acquire()
        .await
        .expect("connection");
    sqlx::raw_sql("BEGIN")
        .execute(&mut *locker)
        .await
        .expect("begin");
    sqlx::raw_sql("LOCK TABLE aggregation.users IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *locker)
        .await
        .expect("lock");
    let started = Instant::now();
    let response = post(
        &service,
        "/api/v1/sessions",
        r#"{"email":"ada@example.com","password":"x"}"#.to_owned(),
    )
    .await;
    let elapsed = started.elapsed();
    drop(locker);
    store.pool().close().await;
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&admin)
    .await;
    assert_timed_out(&response, elapsed);
}
