//! Batched transaction upserts: chunk boundaries, repeated provider ids and mixed outcomes
//! count exactly as row-by-row upserts would, and the account's stored count follows.

use aggregation_core::store::{
    AccountType, NewAccount, NewTransaction, NewUser, Store, TransactionQuery, TransactionStatus,
    TransactionType, now,
};
use aggregation_tests::SharedDatabase;
use rust_decimal::Decimal;
use uuid::Uuid;

fn transaction(index: usize, cents: i64) -> NewTransaction {
    NewTransaction {
        provider_transaction_id: format!("fit-{index:05}"),
        transaction_type: TransactionType::Other,
        subtype: None,
        status: TransactionStatus::Settled,
        amount: Decimal::new(cents, 2),
        currency: "usd".to_owned(),
        description: Some(format!("Line {index}")),
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: chrono::NaiveDate::from_ymd_opt(2024, 1, 1).expect("date"),
        settlement_date: None,
        pending_transaction_id: None,
        merchant_code: None,
    }
}

async fn account(store: &dyn Store) -> (Uuid, Uuid) {
    let user_id = Uuid::now_v7();
    store
        .create_user(&NewUser {
            id: user_id,
            email: "batch@example.com".to_owned(),
            email_normalized: "batch@example.com".to_owned(),
            password_hash: "unused".to_owned(),
            created_at: now(),
        })
        .await
        .expect("user");
    let connection = store
        .find_or_create_connection(user_id, "file_import", Some("Batch Bank"), now())
        .await
        .expect("connection");
    let accounts = store
        .upsert_accounts(
            connection.id,
            &[NewAccount {
                provider_account_id: "batch".to_owned(),
                account_number: None,
                name: "Batch".to_owned(),
                account_type: AccountType::Checking,
                currency: "USD".to_owned(),
                balance_amount: Decimal::ZERO,
                available_balance_amount: None,
                is_active: true,
            }],
            now(),
        )
        .await
        .expect("account");
    (user_id, accounts.ids[0])
}

async fn total(store: &dyn Store, user_id: Uuid, account_id: Uuid) -> u64 {
    store
        .transactions_for_account(
            user_id,
            account_id,
            &TransactionQuery::Recent {
                transaction_type: None,
                limit: 1,
                offset: 0,
            },
        )
        .await
        .expect("page")
        .total_count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_count_like_row_by_row_upserts() {
    let database = SharedDatabase::open().await;
    let store = database.first.as_ref();
    let (user_id, account_id) = account(store).await;

    // 2,500 rows cross two chunk boundaries.
    let first: Vec<NewTransaction> = (0..2_500)
        .map(|i| transaction(i, -100 - i as i64))
        .collect();
    let counts = store
        .upsert_transactions(account_id, &first, now())
        .await
        .expect("first batch");
    assert_eq!(
        (counts.created, counts.updated, counts.unchanged),
        (2_500, 0, 0)
    );
    assert_eq!(counts.ids.len(), 2_500);
    let first_ids = counts.ids.clone();
    assert_eq!(total(store, user_id, account_id).await, 2_500);

    // The same rows with ten amounts changed and five new rows.
    let mut second = first.clone();
    for line in second.iter_mut().take(10) {
        line.amount += Decimal::ONE;
    }
    second.extend((2_500..2_505).map(|i| transaction(i, -1)));
    let counts = store
        .upsert_transactions(account_id, &second, now())
        .await
        .expect("second batch");
    assert_eq!(
        (counts.created, counts.updated, counts.unchanged),
        (5, 10, 2_490)
    );
    // Existing rows keep their ids, in input order.
    assert_eq!(counts.ids[..2_500], first_ids[..]);
    assert_eq!(total(store, user_id, account_id).await, 2_505);

    // A provider id twice in one batch: created, then updated by the later line.
    let repeated = vec![
        transaction(9_000, -5),
        transaction(9_001, -6),
        transaction(9_000, -7),
    ];
    let counts = store
        .upsert_transactions(account_id, &repeated, now())
        .await
        .expect("repeated batch");
    assert_eq!(
        (counts.created, counts.updated, counts.unchanged),
        (2, 1, 0)
    );
    assert_eq!(counts.ids[0], counts.ids[2]);
    assert_eq!(total(store, user_id, account_id).await, 2_507);

    database.cleanup().await;
}
