//! `apply_batch` of file imports on SQLite: counts, idempotence, and all-or-nothing on failure.

use std::str::FromStr as _;

use rust_decimal::Decimal;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use uuid::Uuid;

use super::*;
use crate::import::statement::import_events;

async fn store() -> (SqliteStore, sqlx::SqlitePool) {
    let options = SqliteConnectOptions::from_str("sqlite::memory:")
        .unwrap()
        .foreign_keys(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_with(options)
        .await
        .unwrap();
    let store = SqliteStore::new(pool.clone());
    store.migrate().await.unwrap();
    (store, pool)
}

async fn user(store: &SqliteStore) -> Uuid {
    let id = Uuid::now_v7();
    store
        .create_user(&NewUser {
            id,
            email: format!("{id}@example.com"),
            email_normalized: format!("{id}@example.com"),
            password_hash: "x".to_owned(),
            created_at: now(),
        })
        .await
        .unwrap();
    id
}

fn dec(text: &str) -> Decimal {
    text.parse().unwrap()
}

fn transaction(fit_id: &str, amount: &str) -> NewTransaction {
    NewTransaction {
        provider_transaction_id: fit_id.to_owned(),
        transaction_type: TransactionType::Other,
        subtype: Some("DEBIT".to_owned()),
        status: TransactionStatus::Settled,
        amount: dec(amount),
        currency: "USD".to_owned(),
        description: Some(format!("line {fit_id}")),
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: "2024-01-05".parse().unwrap(),
        settlement_date: None,
        pending_transaction_id: None,
        merchant_code: None,
    }
}

fn batch(alias: &str, account_id: &str, transactions: Vec<NewTransaction>) -> NormalizedBatch {
    NormalizedBatch {
        source: TransactionSource::Import,
        connections: vec![BatchConnection {
            target: BatchTarget::FileImport {
                alias: alias.to_owned(),
            },
            feed: None,
            mark_synced: true,
            accounts: vec![BatchAccount {
                provider_account_id: account_id.to_owned(),
                pending_window: None,
                absent_holdings: AbsentHoldings::Kept,
                account: Some(NewAccount {
                    provider_account_id: account_id.to_owned(),
                    account_number: Some(account_id.to_owned()),
                    name: format!("{alias} Checking"),
                    account_type: AccountType::Checking,
                    currency: "USD".to_owned(),
                    balance_amount: dec("100.00"),
                    available_balance_amount: None,
                    is_active: true,
                }),
                balance_reported: true,
                transactions: Some(transactions),
                holdings: Some(vec![NewHolding {
                    provider_holding_id: "037833100".to_owned(),
                    symbol: "AAPL".to_owned(),
                    security_name: None,
                    asset_type: AssetType::Equity,
                    quantity: dec("1"),
                    cost_basis: None,
                    market_value: dec("190.00"),
                    currency: "USD".to_owned(),
                    average_price: None,
                    current_price: Some(dec("190.00")),
                    unrealized_gain_loss: None,
                }]),
                snapshots: vec![BatchSnapshot {
                    source: SnapshotSource::FileImport,
                    stated: Some(StatedBalances {
                        balance: dec("100.00"),
                        available_balance: None,
                        captured_at: now(),
                    }),
                    holdings_value: None,
                    cash_value: None,
                }],
            }],
        }],
        account_limit: None,
        origin: None,
    }
}

async fn count(pool: &sqlx::SqlitePool, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn imports_count_and_repeat_as_skips() {
    let (store, _pool) = store().await;
    let user_id = user(&store).await;
    let first = batch(
        "Bank",
        "111",
        vec![transaction("A", "-1.00"), transaction("B", "-2.00")],
    );
    let counts = store
        .apply_batch(
            user_id,
            &first,
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(counts.connection_ids.len(), 1);
    assert_eq!(
        (
            counts.accounts.created,
            counts.transactions.created,
            counts.holdings.created,
            counts.snapshots_created
        ),
        (1, 2, 1, 1)
    );
    let again = store
        .apply_batch(
            user_id,
            &first,
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(again.connection_ids, counts.connection_ids);
    assert_eq!(
        (
            again.accounts.unchanged,
            again.transactions.unchanged,
            again.holdings.unchanged,
            again.snapshots_created
        ),
        (1, 2, 1, 0)
    );
    let changed = batch("Bank", "111", vec![transaction("A", "-1.50")]);
    let counts = store
        .apply_batch(
            user_id,
            &changed,
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(counts.transactions.updated, 1);
    assert_eq!(counts.transactions.created, 0);
}

#[tokio::test]
async fn a_failure_rolls_the_whole_import_back() {
    let (store, pool) = store().await;
    let user_id = user(&store).await;
    store
        .apply_batch(
            user_id,
            &batch("Bank", "111", vec![transaction("A", "-1.00")]),
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    sqlx::query(
        "CREATE TRIGGER boom BEFORE INSERT ON transactions \
         WHEN NEW.provider_transaction_id = 'BOOM' BEGIN SELECT RAISE(ABORT, 'boom'); END",
    )
    .execute(&pool)
    .await
    .unwrap();
    let before = (
        count(&pool, "connections").await,
        count(&pool, "accounts").await,
        count(&pool, "transactions").await,
        count(&pool, "holdings").await,
        count(&pool, "balance_snapshots").await,
        count(&pool, "events").await,
    );
    let mut failing = batch(
        "Other Bank",
        "222",
        vec![transaction("C", "-3.00"), transaction("BOOM", "-4.00")],
    );
    failing
        .connections
        .extend(batch("Bank", "111", vec![transaction("A", "-9.00")]).connections);
    failing.connections.reverse();
    let mut raised = Vec::new();
    assert!(
        store
            .apply_batch(
                user_id,
                &failing,
                now(),
                &import_events(user_id, now()),
                &mut raised
            )
            .await
            .is_err()
    );
    assert!(raised.is_empty(), "no event for an import that rolled back");
    let after = (
        count(&pool, "connections").await,
        count(&pool, "accounts").await,
        count(&pool, "transactions").await,
        count(&pool, "holdings").await,
        count(&pool, "balance_snapshots").await,
        count(&pool, "events").await,
    );
    assert_eq!(before, after);
    let amount: String = sqlx::query_scalar("SELECT amount FROM transactions")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(amount, "-1.00", "the update of A was rolled back too");
    assert!(
        store
            .apply_batch(
                Uuid::now_v7(),
                &batch("Bank", "1", Vec::new()),
                now(),
                &import_events(Uuid::now_v7(), now()),
                &mut Vec::new()
            )
            .await
            .is_err(),
        "unknown user"
    );
}

#[tokio::test]
async fn a_preview_counts_like_an_import_and_writes_nothing() {
    let (store, pool) = store().await;
    let user_id = user(&store).await;
    let first = batch("Bank", "111", vec![transaction("A", "-1.00")]);
    let tables = [
        "connections",
        "accounts",
        "transactions",
        "holdings",
        "balance_snapshots",
        "events",
    ];
    let mut before = Vec::new();
    for table in tables {
        before.push(count(&pool, table).await);
    }
    let preview = store.preview_batch(user_id, &first, now()).await.unwrap();
    assert_eq!(
        (
            preview.accounts.created,
            preview.transactions.created,
            preview.snapshots_created
        ),
        (1, 1, 1)
    );
    assert_eq!(preview.per_account.len(), 1);
    assert_eq!(preview.per_account[0].outcome, Some(ImportOutcome::Created));
    assert_eq!(preview.per_account[0].provider_account_id, "111");
    let mut after = Vec::new();
    for table in tables {
        after.push(count(&pool, table).await);
    }
    assert_eq!(before, after, "nothing written");

    let applied = store
        .apply_batch(
            user_id,
            &first,
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    let second = batch(
        "Bank",
        "111",
        vec![transaction("A", "-1.00"), transaction("B", "-2.00")],
    );
    let preview = store.preview_batch(user_id, &second, now()).await.unwrap();
    assert_eq!(preview.connection_ids, applied.connection_ids);
    assert_eq!(
        preview.per_account[0].account_id,
        applied.per_account[0].account_id
    );
    assert_eq!(
        (
            preview.per_account[0].transactions_created,
            preview.per_account[0].transactions_skipped
        ),
        (1, 1)
    );
    assert_eq!(count(&pool, "transactions").await, 1);
}

#[tokio::test]
async fn an_import_into_a_chosen_connection_keeps_its_alias_and_sync_time() {
    let (store, pool) = store().await;
    let user_id = user(&store).await;
    let applied = store
        .apply_batch(
            user_id,
            &batch("Bank", "111", vec![transaction("A", "-1.00")]),
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    let connection_id = applied.connection_ids[0];
    let mut into = batch("Ignored alias", "111", vec![transaction("B", "-2.00")]);
    into.connections[0].target = BatchTarget::Connection(connection_id);
    let counts = store
        .apply_batch(
            user_id,
            &into,
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(counts.connection_ids, vec![connection_id]);
    assert_eq!(
        counts.per_account[0].account_id,
        applied.per_account[0].account_id
    );
    assert_eq!(counts.transactions.created, 1);
    assert_eq!(
        count(&pool, "connections").await,
        1,
        "no connection for the alias"
    );

    let stranger = user(&store).await;
    let refused = store
        .apply_batch(
            stranger,
            &into,
            now(),
            &import_events(stranger, now()),
            &mut Vec::new(),
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(_))),
        "{refused:?}"
    );
}

/// Rows of a statement large enough to be written in batches.
fn many(rows: usize) -> Vec<NewTransaction> {
    (0..rows)
        .map(|row| transaction(&format!("R{row:05}"), &format!("-{}.00", 1 + row % 50)))
        .collect()
}

async fn all_counts(pool: &sqlx::SqlitePool) -> [i64; 7] {
    [
        count(pool, "connections").await,
        count(pool, "accounts").await,
        count(pool, "transactions").await,
        count(pool, "holdings").await,
        count(pool, "balance_snapshots").await,
        count(pool, "events").await,
        count(pool, "import_staging").await,
    ]
}

#[tokio::test]
async fn a_large_import_into_new_accounts_is_written_in_batches_and_repeats_as_skips() {
    let (store, pool) = store().await;
    let user_id = user(&store).await;
    let rows = 2 * crate::store::batches::sql::ROWS_PER_WRITE + 500;
    let large = batch("Bank", "111", many(rows));
    let mut raised = Vec::new();
    let counts = store
        .apply_batch(
            user_id,
            &large,
            now(),
            &import_events(user_id, now()),
            &mut raised,
        )
        .await
        .unwrap();
    assert_eq!(
        (
            counts.accounts.created,
            counts.transactions.created,
            counts.holdings.created,
            counts.snapshots_created
        ),
        (1, rows as u64, 1, 1)
    );
    assert_eq!(counts.per_account[0].transactions_created, rows as u64);
    assert!(!raised.is_empty(), "the events of the import");
    assert_eq!(count(&pool, "import_staging").await, 0, "staging ended");
    assert_eq!(count(&pool, "transactions").await, rows as i64);
    let stored: i64 = sqlx::query_scalar("SELECT transaction_count FROM accounts")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, rows as i64);
    let again = store
        .apply_batch(
            user_id,
            &large,
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        (again.transactions.created, again.transactions.unchanged),
        (0, rows as u64)
    );
}

#[tokio::test]
async fn a_large_import_failing_half_way_leaves_nothing() {
    let (store, pool) = store().await;
    let user_id = user(&store).await;
    store
        .apply_batch(
            user_id,
            &batch("Bank", "111", vec![transaction("A", "-1.00")]),
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    sqlx::query(
        "CREATE TRIGGER boom BEFORE INSERT ON transactions \
         WHEN NEW.provider_transaction_id = 'BOOM' BEGIN SELECT RAISE(ABORT, 'boom'); END",
    )
    .execute(&pool)
    .await
    .unwrap();
    let before = all_counts(&pool).await;
    let rows = 2 * crate::store::batches::sql::ROWS_PER_WRITE + 500;
    let mut transactions = many(rows);
    // In the third batch: two batches are committed when it fails.
    transactions[rows - 100].provider_transaction_id = "BOOM".to_owned();
    let mut raised = Vec::new();
    assert!(
        store
            .apply_batch(
                user_id,
                &batch("Other Bank", "222", transactions),
                now(),
                &import_events(user_id, now()),
                &mut raised,
            )
            .await
            .is_err()
    );
    assert!(raised.is_empty(), "no event for an import that failed");
    assert_eq!(all_counts(&pool).await, before);
}

#[tokio::test]
async fn what_an_abandoned_large_import_left_is_removed_at_start() {
    let (store, pool) = store().await;
    let user_id = user(&store).await;
    let counts = store
        .apply_batch(
            user_id,
            &batch("Bank", "111", vec![transaction("A", "-1.00")]),
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    let before = all_counts(&pool).await;
    let large = batch("Other Bank", "222", many(10));
    let staged = store
        .apply_batch(
            user_id,
            &large,
            now(),
            &import_events(user_id, now()),
            &mut Vec::new(),
        )
        .await
        .unwrap();
    // As if the process had stopped while the import wrote its batches, long ago, and one
    // of its rows had been paired with a row of another account.
    sqlx::query(
        "INSERT INTO import_staging (account_id, import_id, user_id, connection_id, started_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(staged.per_account[0].account_id)
    .bind(Uuid::now_v7())
    .bind(user_id)
    .bind(staged.connection_ids[0])
    .bind(now() - chrono::TimeDelta::hours(1))
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE transactions SET transfer_transaction_id = \
         (SELECT id FROM transactions WHERE account_id = $1 LIMIT 1) WHERE account_id = $2",
    )
    .bind(staged.per_account[0].account_id)
    .bind(counts.per_account[0].account_id)
    .execute(&pool)
    .await
    .unwrap();
    store.migrate().await.unwrap();
    let mut after = all_counts(&pool).await;
    // The abandoned import's events were not written in this simulation either way.
    after[5] = before[5];
    assert_eq!(after, before);
    let paired: Option<Uuid> =
        sqlx::query_scalar("SELECT transfer_transaction_id FROM transactions")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(paired, None, "the other account's row is unpaired");
}
