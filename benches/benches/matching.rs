//! The reconciler: its rules on their own (description similarity, the tip rule, transfer
//! legs), and its cost per incoming row against the size of the account. A dry-run import
//! (the same reconciler, rolled back) of 500 rows of one week, overlapping another format's
//! rows, into accounts holding 10,000, 100,000 and 1,000,000 rows: the candidates come from
//! index ranges around the batch's dates (duplicates in the account, transfer legs in the
//! user's other accounts, pending rows), so all three should take about the same time.
//!
//! Set `AGG_BENCH_MATCHING_SIZES` (comma-separated row counts) to measure other sizes.

use aggregation_core::matching::{books_pending, description_similarity, transfer_legs};
use aggregation_core::store::{
    AbsentHoldings, AccountType, BatchAccount, BatchConnection, BatchCounts, BatchStore,
    BatchTarget, NewAccount, NewTransaction, NewUser, NormalizedBatch, SqliteStore,
    TransactionSource, TransactionStatus, TransactionType, UserStore, now,
};
use chrono::NaiveDate;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rust_decimal::Decimal;
use uuid::Uuid;

fn rules(c: &mut Criterion) {
    let mut group = c.benchmark_group("matching_rules");
    group.throughput(Throughput::Elements(1));
    group.bench_function("description_similarity", |b| {
        b.iter(|| {
            description_similarity(
                std::hint::black_box(Some("SQ *BLUE BOTTLE COFFEE 0042 OAKLAND CA")),
                std::hint::black_box(Some("Blue Bottle Coffee")),
            )
        });
    });
    let day = NaiveDate::from_ymd_opt(2026, 3, 1).expect("date");
    let later = NaiveDate::from_ymd_opt(2026, 3, 3).expect("date");
    group.bench_function("books_pending_tip", |b| {
        b.iter(|| {
            books_pending(
                std::hint::black_box((Decimal::new(-4000, 2), day, Some("Trattoria Roma"))),
                std::hint::black_box((Decimal::new(-4600, 2), later, Some("TRATTORIA ROMA NYC"))),
            )
        });
    });
    group.bench_function("transfer_legs", |b| {
        b.iter(|| {
            transfer_legs(
                std::hint::black_box((Decimal::new(-50000, 2), "USD", day)),
                std::hint::black_box((Decimal::new(50000, 2), "usd", later)),
            )
        });
    });
    group.finish();
}

fn row(index: usize, date: NaiveDate, prefix: &str) -> NewTransaction {
    NewTransaction {
        provider_transaction_id: format!("{prefix}-{index}"),
        transaction_type: TransactionType::Other,
        subtype: None,
        status: TransactionStatus::Settled,
        amount: Decimal::new(-(i64::try_from(index % 5_000).unwrap_or(0) + 100), 2),
        currency: "USD".to_owned(),
        description: Some(format!("Merchant {}", index % 700)),
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: date,
        settlement_date: None,
        pending_transaction_id: None,
        merchant_code: None,
    }
}

fn batch(transactions: Vec<NewTransaction>, origin: &str) -> NormalizedBatch {
    NormalizedBatch {
        source: TransactionSource::Import,
        connections: vec![BatchConnection {
            target: BatchTarget::FileImport {
                alias: "Bench Bank".to_owned(),
            },
            feed: None,
            mark_synced: true,
            accounts: vec![BatchAccount {
                provider_account_id: "bench-checking".to_owned(),
                pending_window: None,
                absent_holdings: AbsentHoldings::Kept,
                account: Some(NewAccount {
                    provider_account_id: "bench-checking".to_owned(),
                    account_number: None,
                    name: "Checking".to_owned(),
                    account_type: AccountType::Checking,
                    currency: "USD".to_owned(),
                    balance_amount: Decimal::ZERO,
                    available_balance_amount: None,
                    is_active: true,
                }),
                balance_reported: false,
                transactions: Some(transactions),
                holdings: Some(Vec::new()),
                snapshots: Vec::new(),
            }],
        }],
        account_limit: None,
        origin: Some(origin.to_owned()),
    }
}

fn per_account_size(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let first_day = NaiveDate::from_ymd_opt(2000, 1, 1).expect("date");
    let mut group = c.benchmark_group("matching_dry_run_500_rows");
    group.sample_size(10);
    group.throughput(Throughput::Elements(500));
    let sizes: Vec<usize> = std::env::var("AGG_BENCH_MATCHING_SIZES")
        .ok()
        .map(|sizes| {
            sizes
                .split(',')
                .filter_map(|size| size.trim().parse().ok())
                .collect()
        })
        .unwrap_or_else(|| vec![10_000, 100_000, 1_000_000]);
    for held in sizes {
        let (store, user_id) = runtime.block_on(async {
            let store = SqliteStore::in_memory().await.expect("store");
            let user_id = Uuid::now_v7();
            store
                .create_user(&NewUser {
                    id: user_id,
                    email: format!("{user_id}@example.com"),
                    email_normalized: format!("{user_id}@example.com"),
                    password_hash: "x".to_owned(),
                    created_at: now(),
                })
                .await
                .expect("user");
            // Ten rows a day over the account's history.
            let history: Vec<NewTransaction> = (0..held)
                .map(|index| {
                    let days = u64::try_from(index / 10).unwrap_or(0);
                    let date = first_day + chrono::Days::new(days);
                    row(index, date, "csv")
                })
                .collect();
            let none = |_: &BatchCounts| Vec::new();
            store
                .apply_batch(
                    user_id,
                    &batch(history, "csv"),
                    now(),
                    &none,
                    &mut Vec::new(),
                )
                .await
                .expect("history");
            (store, user_id)
        });
        // The last week of the history, again from another format.
        let last_day = first_day + chrono::Days::new(u64::try_from(held / 10).unwrap_or(0));
        let incoming: Vec<NewTransaction> = (0..500)
            .map(|index| {
                let days = u64::try_from(index / 70).unwrap_or(0);
                row(
                    held - 500 + index,
                    last_day - chrono::Days::new(days),
                    "ofx",
                )
            })
            .collect();
        let incoming = batch(incoming, "ofx");
        group.bench_function(format!("account_of_{held}"), |b| {
            b.to_async(&runtime).iter(|| async {
                store
                    .preview_batch(user_id, &incoming, now())
                    .await
                    .expect("preview")
            });
        });
    }
    group.finish();
}

criterion_group!(benches, rules, per_account_size);
criterion_main!(benches);
