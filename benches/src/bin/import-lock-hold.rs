//! How long one import holds the SQLite write lock: the duration of
//! [`BatchStore::apply_batch`], whose transaction starts with `BEGIN IMMEDIATE` (the write
//! lock) and ends with its commit, for the shapes a 10 MiB statement file can take. Each
//! shape runs against a fresh SQLite file (WAL, as the reference server opens it) and is
//! imported twice: once into an empty store, once again (every row unchanged).
//!
//! `cargo run -p aggregation-benches --bin import-lock-hold [-- SHAPE...]`, shapes `flat`
//! (135,000 accounts of one transaction: what a 10 MiB MT940 of one-line statements names),
//! `capped` (1,000 accounts of 135 transactions: the most accounts an import may name),
//! `deep` (one account of 135,000 transactions). Prints one line per shape and run, in
//! milliseconds.

use std::time::Instant;

use aggregation_core::store::{
    AbsentHoldings, AccountType, BatchAccount, BatchConnection, BatchCounts, BatchStore,
    BatchTarget, NewAccount, NewTransaction, NewUser, NormalizedBatch, SqliteStore,
    TransactionSource, TransactionStatus, TransactionType, UserStore, now,
};
use rust_decimal::Decimal;
use uuid::Uuid;

/// Rows a 10 MiB MT940 file holds when every entry is one short `:61:` line.
const ROWS: usize = 135_000;

fn transaction(account: usize, index: usize) -> NewTransaction {
    NewTransaction {
        provider_transaction_id: format!("ref-{account}-{index}"),
        transaction_type: TransactionType::Other,
        subtype: None,
        status: TransactionStatus::Settled,
        amount: Decimal::new(-i64::try_from(index % 10_000).unwrap_or(1) - 1, 2),
        currency: "EUR".to_owned(),
        description: Some(format!("Entry {index} of account {account}")),
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: chrono::NaiveDate::from_ymd_opt(2025, 1, 2).unwrap_or_default(),
        settlement_date: None,
        pending_transaction_id: None,
        merchant_code: None,
    }
}

fn batch(accounts: usize, per_account: usize) -> NormalizedBatch {
    NormalizedBatch {
        source: TransactionSource::Import,
        connections: vec![BatchConnection {
            target: BatchTarget::FileImport {
                alias: "Generated Bank".to_owned(),
            },
            feed: None,
            mark_synced: true,
            accounts: (0..accounts)
                .map(|account| BatchAccount {
                    provider_account_id: format!("DE{account:020}"),
                    pending_window: None,
                    absent_holdings: AbsentHoldings::Kept,
                    account: Some(NewAccount {
                        provider_account_id: format!("DE{account:020}"),
                        account_number: Some(format!("DE{account:020}")),
                        name: format!("Account {account}"),
                        account_type: AccountType::Checking,
                        currency: "EUR".to_owned(),
                        balance_amount: Decimal::new(100, 0),
                        available_balance_amount: None,
                        is_active: true,
                    }),
                    balance_reported: true,
                    transactions: Some(
                        (0..per_account)
                            .map(|index| transaction(account, index))
                            .collect(),
                    ),
                    holdings: Some(Vec::new()),
                    snapshots: Vec::new(),
                })
                .collect(),
        }],
        account_limit: None,
        origin: None,
    }
}

#[tokio::main(flavor = "current_thread")]
#[expect(clippy::print_stdout, reason = "the report is the tool's output")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let shapes: Vec<String> = std::env::args().skip(1).collect();
    let shapes = if shapes.is_empty() {
        vec!["flat".to_owned(), "capped".to_owned(), "deep".to_owned()]
    } else {
        shapes
    };
    for shape in shapes {
        let (accounts, per_account) = match shape.as_str() {
            "flat" => (ROWS, 1),
            "capped" => (1_000, ROWS / 1_000),
            "deep" => (1, ROWS),
            other => return Err(format!("unknown shape {other:?}").into()),
        };
        let folder = std::env::temp_dir().join(format!("import-lock-hold-{}", Uuid::now_v7()));
        std::fs::create_dir_all(&folder)?;
        let url = format!("sqlite://{}?mode=rwc", folder.join("store.db").display());
        let store = SqliteStore::connect(&url).await?;
        store.migrate().await?;
        let user_id = Uuid::now_v7();
        store
            .create_user(&NewUser {
                id: user_id,
                email: "lock@example.com".to_owned(),
                email_normalized: "lock@example.com".to_owned(),
                password_hash: "unused".to_owned(),
                created_at: now(),
            })
            .await?;
        let batch = batch(accounts, per_account);
        let no_events = |_: &BatchCounts| Vec::new();
        for run in ["first", "again"] {
            let started = Instant::now();
            let counts = store
                .apply_batch(user_id, &batch, now(), &no_events, &mut Vec::new())
                .await?;
            println!(
                "{shape:>6} {run:>5}: {accounts} accounts x {per_account} transactions, \
                 write transaction {} ms (accounts created {}, transactions created {}, \
                 skipped {})",
                started.elapsed().as_millis(),
                counts.accounts.created,
                counts.transactions.created,
                counts.transactions.unchanged,
            );
        }
        drop(store);
        std::fs::remove_dir_all(&folder)?;
    }
    Ok(())
}
