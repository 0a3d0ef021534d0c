//! The search across accounts, the by-account listing's cursor against its offset, and the
//! spending summary, through the bare service, for one user whose account holds
//! `AGG_BENCH_SEARCH_ROWS` transactions (default 200,000; the figure is 1,000,000)
//! over about five years: a common word (`coffee`, one row in five) and a rare one
//! (`zeppelin`, one row in 10,000), the first page and a deep page (page 20,000, or the
//! deepest the rows hold) by `cursor` and by `offset`, and spending over a year by month.
//! SQLite (a file in a temporary folder) always; PostgreSQL when `AGG_BENCH_DATABASE_URL` is
//! set.
//!
//! Besides criterion's estimates, each case is timed over 100 requests first and its p50 and
//! p99 printed (to stderr), so the load figures come from the same run.
//!
//! `import_index_cost` measures what the search index costs an import: the same CSV import
//! of 50,000 rows (each into a new account) through `POST /api/v1/imports`, into a store
//! migrated as shipped and into one whose search index was dropped after migrating, side by
//! side in one run, on each backend.
//!
//! `cargo bench -p aggregation-benches --profile measure --bench search`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aggregation_benches::{
    PASSWORD, access_token, call, config, json_request, on_each_backend, runtime, service_sharing,
    verified_user,
};
use aggregation_core::AggregationService;
use aggregation_core::store::{
    AccountType, NewAccount, NewTransaction, PostgresStore, SqliteStore, Store, TransactionStatus,
    TransactionType, now,
};
use aggregation_core::testing::ThrowawayDatabase;
use bytes::Bytes;
use chrono::{Days, NaiveDate};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use http::{Method, Request, header};
use http_body_util::Full;
use rust_decimal::Decimal;

/// Rows of a listing page.
const PAGE: usize = 50;
/// The deep page compared with the first.
const DEEP_PAGE: usize = 20_000;

struct Fixture {
    service: AggregationService,
    access_token: String,
    account_id: String,
    rows: usize,
}

fn rows() -> usize {
    std::env::var("AGG_BENCH_SEARCH_ROWS")
        .ok()
        .and_then(|rows| rows.parse().ok())
        .unwrap_or(200_000)
}

/// A description: a merchant of a small vocabulary, `coffee` in one row of five and
/// `zeppelin` in one of 10,000.
fn description(index: usize) -> String {
    const MERCHANTS: [&str; 8] = [
        "SQ *GREEN GROCER 0412 OAKLAND CA",
        "AMZN Mktp US*2K4 Seattle WA",
        "SHELL OIL 57442 BERKELEY CA",
        "PAYPAL *SPOTIFY 4029357733",
        "TST* THE BURGER JOINT",
        "Rent Maple Apartments",
        "UBER *TRIP HELP.UBER.COM",
        "CITY OF OAKLAND PARKING",
    ];
    if index % 10_000 == 7 {
        format!("Zeppelin museum ticket {index}")
    } else if index.is_multiple_of(5) {
        format!("BLUE BOTTLE COFFEE {} OAKLAND CA", index % 97)
    } else {
        format!("{} {}", MERCHANTS[index % MERCHANTS.len()], index % 1_000)
    }
}

async fn seed(store: Arc<dyn Store>) -> Fixture {
    let rows = rows();
    let (service, mailer) = service_sharing(store.clone(), config());
    verified_user(&service, &mailer, "searcher@example.com").await;
    let (_, tokens) = call(
        &service,
        json_request(
            Method::POST,
            "/api/v1/sessions",
            &serde_json::json!({"email": "searcher@example.com", "password": PASSWORD}),
        ),
    )
    .await;
    let access_token = tokens["access_token"].as_str().expect("token").to_owned();
    let user = store
        .user_by_email("searcher@example.com")
        .await
        .expect("store")
        .expect("user");
    let connection = store
        .find_or_create_connection(user.id, "file_import", Some("Bench Bank"), now())
        .await
        .expect("connection");
    let account = NewAccount {
        provider_account_id: "checking".to_owned(),
        account_number: Some("00001234".to_owned()),
        name: "Checking".to_owned(),
        account_type: AccountType::Checking,
        currency: "USD".to_owned(),
        balance_amount: Decimal::new(100_000, 2),
        available_balance_amount: None,
        is_active: true,
    };
    let upserted = store
        .upsert_accounts(connection.id, &[account], now())
        .await
        .expect("account");
    let account_id = upserted.ids[0];
    // About five years, the last day being 2026-12-31.
    let days = 5 * 365;
    let first = NaiveDate::from_ymd_opt(2022, 1, 2).expect("date");
    let started = Instant::now();
    for chunk in (0..rows).collect::<Vec<_>>().chunks(5_000) {
        let batch: Vec<NewTransaction> = chunk
            .iter()
            .map(|&index| NewTransaction {
                provider_transaction_id: format!("fit-{index:08}"),
                transaction_type: TransactionType::Other,
                subtype: None,
                status: TransactionStatus::Settled,
                amount: if index.is_multiple_of(50) {
                    Decimal::new(250_000 + (index % 1_000) as i64, 2)
                } else {
                    Decimal::new(-((index % 10_000) as i64) - 1, 2)
                },
                currency: "USD".to_owned(),
                description: Some(description(index)),
                symbol: None,
                security_name: None,
                quantity: None,
                unit_price: None,
                commission: None,
                transaction_date: first + Days::new((index * days / rows) as u64),
                settlement_date: None,
                pending_transaction_id: None,
                merchant_code: None,
            })
            .collect();
        store
            .upsert_transactions(account_id, &batch, now())
            .await
            .expect("transactions");
    }
    eprintln!(
        "search bench: {rows} rows written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Fixture {
        service,
        access_token,
        account_id: account_id.to_string(),
        rows,
    }
}

async fn get(fixture: &Fixture, path: &str) -> serde_json::Value {
    let request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(
            header::AUTHORIZATION,
            format!("Bearer {}", fixture.access_token),
        )
        .body(Full::new(Bytes::new()))
        .expect("request");
    let (status, body) = call(&fixture.service, request).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// The p50 and p99 of 100 requests of `path`, after 5 unmeasured ones.
async fn percentiles(fixture: &Fixture, path: &str) -> (Duration, Duration) {
    for _ in 0..5 {
        get(fixture, path).await;
    }
    let mut times: Vec<Duration> = Vec::with_capacity(100);
    for _ in 0..100 {
        let started = Instant::now();
        get(fixture, path).await;
        times.push(started.elapsed());
    }
    times.sort();
    (times[49], times[98])
}

fn bench_backend(c: &mut Criterion, name: &str, runtime: &tokio::runtime::Runtime, f: &Fixture) {
    let account = &f.account_id;
    // The deep page: page 20,000 when the rows hold it, else the last full page.
    let deep = DEEP_PAGE.min(f.rows / PAGE);
    let offset = (deep - 1) * PAGE;
    // The page before the deep one, read by offset, names the deep one by cursor.
    let before = runtime.block_on(get(
        f,
        &format!(
            "/api/v1/accounts/{account}/transactions?limit={PAGE}&offset={}",
            offset - PAGE
        ),
    ));
    let deep_cursor = before["next_cursor"].as_str().expect("cursor").to_owned();
    let search_first = runtime.block_on(get(f, "/api/v1/transactions?q=coffee&limit=50"));
    let coffee_cursor = search_first["next_cursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    let cases: Vec<(String, String)> = vec![
        (
            "search_common_word".to_owned(),
            "/api/v1/transactions?q=coffee&limit=50".to_owned(),
        ),
        (
            "search_common_word_page_2".to_owned(),
            format!("/api/v1/transactions?q=coffee&limit=50&cursor={coffee_cursor}"),
        ),
        (
            "search_rare_word".to_owned(),
            "/api/v1/transactions?q=zeppelin&limit=50".to_owned(),
        ),
        (
            "search_two_words".to_owned(),
            "/api/v1/transactions?q=coffee%20oakland&limit=50".to_owned(),
        ),
        (
            "search_no_words".to_owned(),
            "/api/v1/transactions?limit=50".to_owned(),
        ),
        (
            "account_cursor_page_1".to_owned(),
            format!("/api/v1/accounts/{account}/transactions?limit={PAGE}"),
        ),
        (
            format!("account_cursor_page_{deep}"),
            format!("/api/v1/accounts/{account}/transactions?limit={PAGE}&cursor={deep_cursor}"),
        ),
        (
            format!("account_offset_page_{deep}"),
            format!("/api/v1/accounts/{account}/transactions?limit={PAGE}&offset={offset}"),
        ),
        (
            "spending_year_by_month".to_owned(),
            "/api/v1/spending?from=2026-01-01&to=2026-12-31&interval=month&group_by=merchant"
                .to_owned(),
        ),
    ];
    let mut group = c.benchmark_group(format!("search_{name}_{}_rows", f.rows));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(2));
    for (case, path) in &cases {
        let (p50, p99) = runtime.block_on(percentiles(f, path));
        eprintln!(
            "search bench {name} {} rows {case}: p50 {:.2} ms, p99 {:.2} ms",
            f.rows,
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
        group.bench_function(case, |b| {
            b.to_async(runtime).iter(|| get(f, path));
        });
    }
    group.finish();
}

fn search(c: &mut Criterion) {
    let runtime = runtime();
    on_each_backend(&runtime, seed, |name, fixture| {
        bench_backend(c, name, &runtime, fixture);
    });
}

/// Rows of the import of [`import_index_cost`].
const IMPORT_ROWS: usize = 50_000;
const BOUNDARY: &str = "----aggregation-search-bench";

/// A CSV statement of [`IMPORT_ROWS`] rows.
fn csv_statement() -> String {
    let first = NaiveDate::from_ymd_opt(2025, 1, 1).expect("date");
    let mut file = String::from("Date,Description,Amount\n");
    for index in 0..IMPORT_ROWS {
        let date = first + Days::new((index / 150) as u64);
        let cents = -((index % 10_000) as i64) - 1;
        file.push_str(&format!(
            "{date},{},{}.{:02}\n",
            description(index).replace(',', " "),
            cents / 100,
            (cents % 100).abs()
        ));
    }
    file
}

/// The multipart body of an import of `file` into a new account `account`.
fn multipart(file: &str, account: &str) -> Bytes {
    let mut body = Vec::with_capacity(file.len() + 512);
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"statement.csv\"\r\nContent-Type: text/csv\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file.as_bytes());
    body.extend_from_slice(
        format!(
            "\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"account_name\"\r\n\r\n\
             {account}\r\n--{BOUNDARY}--\r\n"
        )
        .as_bytes(),
    );
    Bytes::from(body)
}

/// Imports `body`; panics unless every row was created.
async fn import(service: &AggregationService, token: &str, body: Bytes) {
    let request = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/imports")
        .header(
            header::CONTENT_TYPE,
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Full::new(body))
        .expect("request");
    let (status, json) = call(service, request).await;
    assert_eq!(status, 201, "import: {json}");
    assert_eq!(
        json["transactions_created"], IMPORT_ROWS as u64,
        "import: {json}"
    );
}

/// Benchmarks the import on each of `stores` (a name and a store), one after the other.
fn bench_imports(
    c: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    backend: &str,
    stores: Vec<(&str, Arc<dyn Store>)>,
) {
    let file = csv_statement();
    let mut group = c.benchmark_group(format!("import_index_cost_{backend}"));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(IMPORT_ROWS as u64));
    let accounts = AtomicU64::new(0);
    for (name, store) in stores {
        let limits = config().with_max_upload_bytes(64 * 1024 * 1024);
        let (service, mailer) = service_sharing(store, limits);
        let token = runtime.block_on(access_token(&service, &mailer, "importer@example.com"));
        group.bench_function(name, |b| {
            b.to_async(runtime).iter_custom(|iters| {
                let (service, token, file, accounts) = (&service, &token, &file, &accounts);
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let n = accounts.fetch_add(1, Ordering::Relaxed);
                        let body = multipart(file, &format!("Account {n}"));
                        let started = Instant::now();
                        import(service, token, body).await;
                        total += started.elapsed();
                    }
                    total
                }
            });
        });
    }
    group.finish();
}

/// What the search index costs an import, with and without it, on each backend.
fn import_index_cost(c: &mut Criterion) {
    let runtime = runtime();
    let folder = tempfile::tempdir().expect("temporary folder");
    let sqlite = |name: &str, drop_index: bool| {
        let url = format!(
            "sqlite://{}?mode=rwc",
            folder.path().join(format!("{name}.db")).display()
        );
        runtime.block_on(async {
            let store = SqliteStore::connect(&url).await.expect("sqlite");
            store.migrate().await.expect("migrate");
            if drop_index {
                let pool = sqlx::SqlitePool::connect(&url).await.expect("sqlite pool");
                sqlx::raw_sql(
                    "DROP TRIGGER transactions_search_insert; \
                     DROP TRIGGER transactions_search_delete; \
                     DROP TRIGGER transactions_search_update; \
                     DROP TABLE transactions_search;",
                )
                .execute(&pool)
                .await
                .expect("drop the search index");
                pool.close().await;
            }
            Arc::new(store) as Arc<dyn Store>
        })
    };
    let with_index = sqlite("with", false);
    let without_index = sqlite("without", true);
    bench_imports(
        c,
        &runtime,
        "sqlite",
        vec![("with_index", with_index), ("without_index", without_index)],
    );

    let Some(admin_url) = std::env::var("AGG_BENCH_DATABASE_URL").ok() else {
        eprintln!("import_index_cost/postgres skipped: AGG_BENCH_DATABASE_URL is not set");
        return;
    };
    let postgres = |drop_index: bool| {
        runtime.block_on(async {
            let database = ThrowawayDatabase::create(&admin_url, "agg_bench")
                .await
                .expect("a database for the run");
            let store = PostgresStore::connect(database.url())
                .await
                .expect("connect");
            store.migrate().await.expect("migrate");
            if drop_index {
                let pool = sqlx::PgPool::connect(database.url()).await.expect("pool");
                sqlx::raw_sql("DROP INDEX aggregation.transactions_search")
                    .execute(&pool)
                    .await
                    .expect("drop the search index");
                pool.close().await;
            }
            (database, Arc::new(store) as Arc<dyn Store>)
        })
    };
    let (with_database, with_index) = postgres(false);
    let (without_database, without_index) = postgres(true);
    bench_imports(
        c,
        &runtime,
        "postgres",
        vec![("with_index", with_index), ("without_index", without_index)],
    );
    runtime.block_on(with_database.drop_database());
    runtime.block_on(without_database.drop_database());
}

criterion_group!(benches, search, import_index_cost);
criterion_main!(benches);
