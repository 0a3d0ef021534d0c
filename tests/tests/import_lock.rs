//! Conformance: a large import leaves another user's writes answered (decisions.md, "One
//! user's work never hurts another's"). One user uploads a statement of [`ROWS`] rows while
//! another user keeps writing (small imports of their own, one row each, 20 ms apart): every one of those
//! writes is answered 201, none 503, and the large import is still all-or-nothing and
//! idempotent (all rows created once, a re-import creates nothing).
//!
//! On SQLite the case runs on a database file opened the way the reference server opens it
//! (WAL, several connections), with a store timeout of [`STORE_TIMEOUT`]: a write that waits
//! longer than that for the write lock fails with 503, so a large import holding the lock in
//! one long transaction fails the case. On PostgreSQL (`AGG_TEST_DATABASE_URL`) it runs on the
//! case's own database.
//!
//! Each case prints how long the other user's writes took (run with `--nocapture`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aggregation_core::store::{SqliteStore, Store};
use aggregation_tests::imports::{accounts, count};
use aggregation_tests::{Backend, Setup, Target, TestApp, run_setup, upload_with};

/// Rows of the large statement: enough that writing them in one transaction holds the lock
/// for longer than [`STORE_TIMEOUT`] in a debug build.
const ROWS: usize = 60_000;

/// How long a store call may wait for the write lock on SQLite.
const STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// The most small writes of the other user, one after another, while the import runs.
const MAX_SMALL_WRITES: usize = 2_000;

const PARTS: &[(&str, &str)] = &[("account_name", "Checking"), ("currency", "EUR")];

/// A CSV statement of `rows` rows, each with its own date, amount and description.
fn statement(rows: usize, tag: &str) -> String {
    let mut out = String::with_capacity(rows * 48 + 32);
    out.push_str("Date,Description,Amount\n");
    for row in 0..rows {
        let day = 1 + row % 28;
        let month = 1 + (row / 28) % 12;
        let year = 2000 + (row / 336) % 25;
        let cents = (row * 7919) % 250_000;
        out.push_str(&format!(
            "{year}-{month:02}-{day:02},{tag} purchase {row} at merchant {},-{}.{:02}\n",
            row % 997,
            cents / 100,
            cents % 100
        ));
    }
    out
}

async fn another_users_writes_are_answered_while_a_large_import_runs(app: TestApp) {
    let (_, heavy, _) = app.user("heavy@example.com").await;
    let (_, light, _) = app.user("light@example.com").await;
    let large = statement(ROWS, "Large");
    let done = AtomicBool::new(false);

    let import = async {
        let answer = upload_with(&app, Some("large.csv"), large.as_bytes(), PARTS, &heavy).await;
        done.store(true, Ordering::SeqCst);
        answer
    };
    let writes = async {
        let mut answers = Vec::new();
        // Let the upload start; then write until it is answered.
        tokio::time::sleep(Duration::from_millis(50)).await;
        while !done.load(Ordering::SeqCst) && answers.len() < MAX_SMALL_WRITES {
            let row = format!(
                "Date,Description,Amount\n2024-01-01,Small write {},-1.00\n",
                answers.len()
            );
            let started = Instant::now();
            let answer = upload_with(&app, Some("small.csv"), row.as_bytes(), PARTS, &light).await;
            answers.push((answer, started.elapsed()));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        answers
    };
    let (large_answer, small_answers) = tokio::join!(import, writes);

    let body = large_answer.expect(201);
    assert_eq!(count(&body, "transactions_created"), ROWS as u64, "{body}");
    let slowest = small_answers
        .iter()
        .map(|(_, took)| *took)
        .max()
        .unwrap_or_default();
    eprintln!(
        "{:?}/{:?}: {} small writes while the import ran, slowest {slowest:?}",
        app.target,
        app.backend,
        small_answers.len()
    );
    assert!(
        !small_answers.is_empty(),
        "the import was answered before another write could start"
    );
    for (index, (answer, took)) in small_answers.iter().enumerate() {
        assert_eq!(
            answer.status.as_u16(),
            201,
            "small write {index} after {took:?}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        assert_eq!(count(&answer.json(), "transactions_created"), 1);
    }

    // Still all-or-nothing and idempotent: the same file again creates nothing.
    let again = upload_with(&app, Some("large.csv"), large.as_bytes(), PARTS, &heavy)
        .await
        .expect(201);
    assert_eq!(count(&again, "transactions_created"), 0, "{again}");
    assert_eq!(
        count(&again, "transactions_skipped"),
        ROWS as u64,
        "{again}"
    );
    assert_eq!(accounts(&app, &heavy).await.len(), 1);
    assert_eq!(accounts(&app, &light).await.len(), 1);
}

/// Runs the case on a SQLite file of its own (removed after), with the short store timeout.
async fn on_sqlite_file(target: Target) {
    let folder = std::env::temp_dir().join(format!(
        "aggregation-import-lock-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&folder).expect("temporary folder");
    let url = format!("sqlite://{}?mode=rwc", folder.join("store.db").display());
    let store = SqliteStore::connect_with_timeout(&url, STORE_TIMEOUT)
        .await
        .expect("open SQLite file");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    let setup = Setup {
        store: Some(store),
        ..Setup::default()
    };
    run_setup(
        target,
        Backend::Sqlite,
        setup,
        another_users_writes_are_answered_while_a_large_import_runs,
    )
    .await;
    let _ = std::fs::remove_dir_all(folder);
}

async fn on_postgres(target: Target) {
    run_setup(
        target,
        Backend::Postgres,
        Setup::default(),
        another_users_writes_are_answered_while_a_large_import_runs,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_sqlite_another_users_writes_are_answered_while_a_large_import_runs() {
    on_sqlite_file(Target::Bare).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axum_sqlite_another_users_writes_are_answered_while_a_large_import_runs() {
    on_sqlite_file(Target::Axum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actix_sqlite_another_users_writes_are_answered_while_a_large_import_runs() {
    on_sqlite_file(Target::Actix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_postgres_another_users_writes_are_answered_while_a_large_import_runs() {
    on_postgres(Target::Bare).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn axum_postgres_another_users_writes_are_answered_while_a_large_import_runs() {
    on_postgres(Target::Axum).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actix_postgres_another_users_writes_are_answered_while_a_large_import_runs() {
    on_postgres(Target::Actix).await;
}
