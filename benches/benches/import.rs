//! OFX/QFX import: parsing a 100,000-transaction bank statement (OFX 1.x SGML and OFX 2.x
//! XML, written by `write_ofx1`/`write_ofx2`), and the whole `POST /api/v1/imports` of that
//! file through the bare service into SQLite (a temporary file) and, when
//! `AGG_BENCH_DATABASE_URL` names a PostgreSQL server, into a database created for the run and
//! dropped after it.
//!
//! `import_ofx_size` parses a statement of 25,000 transactions and one of 50,000, in each
//! syntax: the time of each pair should be about double (no step is quadratic).
//!
//! `cargo bench -p aggregation-benches --bench import`. Parse throughput is reported in bytes/s
//! and transactions/s; the import in transactions/s. Each import iteration goes to a new
//! institution (its `ORG` is changed outside the timing), so every iteration creates a
//! connection, an account and 100,000 transactions in one store transaction.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aggregation_benches::{BenchDatabase, access_token, config, service_on};
use aggregation_core::AggregationService;
use aggregation_core::import::{
    Balance, OfxDocument, Signon, Statement, StatementAccount, StatementKind, StatementTransaction,
    TransactionKind, parse_ofx, write_ofx1, write_ofx2,
};
use aggregation_core::store::{SqliteStore, Store};
use bytes::Bytes;
use chrono::{DateTime, TimeDelta, Utc};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use http::{Method, Request, header};
use http_body_util::{BodyExt as _, Full};
use rust_decimal::Decimal;
use tower::ServiceExt as _;

/// Transactions in the benchmark statement.
const TRANSACTIONS: usize = 100_000;
/// The institution name written into the file; replaced per import iteration.
const ORG: &str = "Bench Bank 000000";
const BOUNDARY: &str = "----aggregation-bench-boundary";

/// A bank statement with `count` transactions.
fn statement_document(count: usize) -> OfxDocument {
    let start = DateTime::<Utc>::from_timestamp(1_577_836_800, 0).expect("2020-01-01");
    let transactions = (0..count)
        .map(|i| {
            let credit = i % 7 == 0;
            let trn_type = if credit { "CREDIT" } else { "DEBIT" };
            let cents = i64::try_from(i % 100_000).unwrap_or_default() + 1;
            StatementTransaction {
                fit_id: format!("FIT{i:010}"),
                kind: TransactionKind::Bank(trn_type.to_owned()),
                trn_type: Some(trn_type.to_owned()),
                posted: (start + TimeDelta::minutes(i64::try_from(i).unwrap_or_default() * 5))
                    .fixed_offset(),
                user_date: None,
                settled: None,
                amount: Decimal::new(if credit { cents } else { -cents }, 2),
                name: Some(format!("Merchant {}", i % 997)),
                memo: Some("Card purchase".to_owned()),
                check_number: None,
                symbol: None,
                security_name: None,
                security_id: None,
                units: None,
                unit_price: None,
                commission: None,
                income_type: None,
                currency: None,
            }
        })
        .collect();
    let end = start + TimeDelta::minutes(i64::try_from(count).unwrap_or_default() * 5);
    OfxDocument {
        signon: Some(Signon {
            status_code: 0,
            severity: "INFO".to_owned(),
            message: None,
            org: Some(ORG.to_owned()),
            fid: Some("1234".to_owned()),
        }),
        statements: vec![Statement {
            kind: StatementKind::Bank,
            currency: "USD".to_owned(),
            account: StatementAccount {
                account_id: Some("123456789".to_owned()),
                bank_id: Some("021000021".to_owned()),
                branch_id: None,
                broker_id: None,
                account_type: Some("CHECKING".to_owned()),
            },
            transactions,
            positions: Vec::new(),
            ledger_balance: Some(Balance {
                amount: Decimal::new(12_345_678, 2),
                as_of: Some(end),
            }),
            available_balance: Some(Balance {
                amount: Decimal::new(12_000_000, 2),
                as_of: Some(end),
            }),
            investment_balance: None,
            start: Some(start),
            end: Some(end),
            as_of: None,
        }],
        warnings: Vec::new(),
    }
}

fn parse(c: &mut Criterion) {
    let document = statement_document(TRANSACTIONS);
    let files = [
        ("ofx1_sgml", write_ofx1(&document)),
        ("ofx2_xml", write_ofx2(&document)),
    ];
    for (_, text) in &files {
        let parsed = parse_ofx(text.as_bytes()).expect("the written file parses");
        assert_eq!(
            parsed.statements.first().map(|s| s.transactions.len()),
            Some(TRANSACTIONS)
        );
    }
    let mut group = c.benchmark_group("import_parse_100k");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    for (name, text) in &files {
        group.throughput(Throughput::ElementsAndBytes {
            elements: TRANSACTIONS as u64,
            bytes: text.len() as u64,
        });
        group.bench_function(*name, |b| {
            b.iter(|| parse_ofx(std::hint::black_box(text.as_bytes())).expect("parses"));
        });
    }
    group.finish();
}

/// Transactions of the smaller file of [`twice_the_size`] (about 5 MiB of OFX 1.x).
const SCALING_TRANSACTIONS: usize = 25_000;

/// The cost of a file twice as large, in both OFX syntaxes: the ratio of each pair of times
/// should be about 2 (linear parsing, decisions.md "One user's work never hurts another's").
fn twice_the_size(c: &mut Criterion) {
    let mut group = c.benchmark_group("import_ofx_size");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for (size, count) in [
        ("1x", SCALING_TRANSACTIONS),
        ("2x", 2 * SCALING_TRANSACTIONS),
    ] {
        let document = statement_document(count);
        for (syntax, text) in [
            ("ofx1_sgml", write_ofx1(&document)),
            ("ofx2_xml", write_ofx2(&document)),
        ] {
            let parsed = parse_ofx(text.as_bytes()).expect("the written file parses");
            assert_eq!(
                parsed.statements.first().map(|s| s.transactions.len()),
                Some(count)
            );
            group.throughput(Throughput::ElementsAndBytes {
                elements: count as u64,
                bytes: text.len() as u64,
            });
            group.bench_function(format!("{syntax}_{size}"), |b| {
                b.iter(|| parse_ofx(std::hint::black_box(text.as_bytes())).expect("parses"));
            });
        }
    }
    group.finish();
}

/// The multipart body of an upload of `file` as `statement.qfx`.
fn multipart(file: &str) -> Bytes {
    let mut body = Vec::with_capacity(file.len() + 256);
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"statement.qfx\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file.as_bytes());
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    Bytes::from(body)
}

/// Imports `body`; panics unless every transaction was created.
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
    let response = service.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    assert_eq!(status, 201, "import: {json}");
    assert_eq!(
        json["transactions_created"], TRANSACTIONS as u64,
        "import: {json}"
    );
}

/// Benchmarks `POST /api/v1/imports` of the OFX 1.x file on `store`.
fn bench_import(
    c: &mut Criterion,
    runtime: &tokio::runtime::Runtime,
    name: &str,
    store: impl Store,
    file: &str,
) {
    let config = config().with_max_upload_bytes(512 * 1024 * 1024);
    let (service, mailer) = runtime.block_on(async { service_on(store, config) });
    let token = runtime.block_on(access_token(&service, &mailer, "importer@example.com"));
    let institution = AtomicU64::new(0);
    let mut group = c.benchmark_group("import_100k");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(TRANSACTIONS as u64));
    group.bench_function(name, |b| {
        b.to_async(runtime).iter_custom(|iters| {
            let (service, token, institution) = (&service, &token, &institution);
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let n = institution.fetch_add(1, Ordering::Relaxed);
                    let org = format!("Bench Bank {n:06}");
                    let body = multipart(&file.replacen(ORG, &org, 1));
                    let started = Instant::now();
                    import(service, token, body).await;
                    total += started.elapsed();
                }
                total
            }
        });
    });
    group.finish();
}

fn end_to_end(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let file = write_ofx1(&statement_document(TRANSACTIONS));

    let directory = tempfile::tempdir().expect("temporary directory");
    let url = format!(
        "sqlite://{}?mode=rwc",
        directory.path().join("import-bench.db").display()
    );
    let sqlite = runtime.block_on(async {
        let store = SqliteStore::connect(&url).await.expect("sqlite file");
        store.migrate().await.expect("migrate");
        store
    });
    bench_import(c, &runtime, "sqlite_file", sqlite, &file);

    match std::env::var("AGG_BENCH_DATABASE_URL") {
        Ok(admin_url) if !admin_url.trim().is_empty() => {
            let (database, store) = runtime.block_on(BenchDatabase::create(&admin_url));
            bench_import(c, &runtime, "postgres", store, &file);
            runtime.block_on(database.drop_database());
        }
        _ => eprintln!("import_100k/postgres skipped: AGG_BENCH_DATABASE_URL is not set"),
    }
}

criterion_group!(benches, parse, twice_the_size, end_to_end);
criterion_main!(benches);
