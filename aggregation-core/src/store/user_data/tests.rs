//! Erasure on SQLite: every table that reaches a user is covered, the batches delete only the
//! erased user's rows, and an interrupted erasure is taken over once its lease lapses.

use std::collections::{BTreeSet, HashMap};
use std::str::FromStr as _;

use chrono::TimeDelta;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use uuid::Uuid;

use crate::events::{DurableEvent as _, UserDeleted};
use crate::store::*;

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

/// Every table of the migrated schema, with the tables its foreign keys point to and whether
/// it has a `user_id` column.
async fn schema(pool: &sqlx::SqlitePool) -> HashMap<String, (bool, Vec<String>)> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_sqlx%'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut schema = HashMap::new();
    for table in tables {
        let columns: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info($1)")
            .bind(&table)
            .fetch_all(pool)
            .await
            .unwrap();
        let parents: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT \"table\" FROM pragma_foreign_key_list($1)")
                .bind(&table)
                .fetch_all(pool)
                .await
                .unwrap();
        let has_user_id = columns.iter().any(|column| column == "user_id");
        schema.insert(table, (has_user_id, parents));
    }
    schema
}

#[tokio::test]
async fn every_table_that_reaches_a_user_is_erased_and_exported() {
    let (_store, pool) = store().await;
    let schema = schema(&pool).await;
    // A table reaches a user through a `user_id` column or a chain of foreign keys to one.
    let mut reaching: BTreeSet<String> = ["users".to_owned()].into();
    loop {
        let before = reaching.len();
        for (table, (has_user_id, parents)) in &schema {
            if *has_user_id || parents.iter().any(|parent| reaching.contains(parent)) {
                reaching.insert(table.clone());
            }
        }
        if reaching.len() == before {
            break;
        }
    }
    let handled: BTreeSet<String> = USER_TABLES
        .iter()
        .map(|table| table.name.to_owned())
        .chain(KEPT_USER_TABLES.iter().map(|(name, _)| (*name).to_owned()))
        .collect();
    let missing: Vec<&String> = reaching.difference(&handled).collect();
    assert!(
        missing.is_empty(),
        "tables holding users' rows that erasure and export do not handle: {missing:?}; \
         add each to USER_TABLES (store/user_data/mod.rs)"
    );
    for table in &handled {
        assert!(
            schema.contains_key(table),
            "{table} is listed but not in the schema"
        );
    }
    // Rows go before the rows their foreign keys point to.
    let position: HashMap<&str, usize> = USER_TABLES
        .iter()
        .enumerate()
        .map(|(index, table)| (table.name, index))
        .collect();
    for table in USER_TABLES {
        for parent in &schema[table.name].1 {
            if let Some(parent_position) = position.get(parent.as_str()) {
                assert!(
                    position[table.name] < *parent_position,
                    "{} must be emptied before {parent}",
                    table.name
                );
            }
        }
    }
    // Every exported table names a section of the export document.
    for table in USER_TABLES {
        if let Exported::Section(section) = table.exported {
            assert!(
                crate::api::users::EXPORT_SECTIONS
                    .iter()
                    .any(|(name, _)| *name == section),
                "{}: no export section {section}",
                table.name
            );
        }
    }
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

/// A user with one connection, one account and `count` transactions: its account id.
async fn seeded(store: &SqliteStore, user_id: Uuid, count: usize) -> Uuid {
    let connection = store
        .create_connection(&NewConnection {
            id: Uuid::now_v7(),
            user_id,
            provider_slug: "bank".to_owned(),
            alias: None,
            status: ConnectionStatus::Active,
            encrypted_credentials: None,
            credentials_key_id: None,
            credentials_expires_at: None,
            created_at: now(),
        })
        .await
        .unwrap();
    let account = NewAccount {
        provider_account_id: "checking".to_owned(),
        account_number: None,
        name: "Checking".to_owned(),
        account_type: AccountType::Checking,
        currency: "USD".to_owned(),
        balance_amount: "10.00".parse().unwrap(),
        available_balance_amount: None,
        is_active: true,
    };
    let account_id = store
        .upsert_accounts(connection.id, &[account], now())
        .await
        .unwrap()
        .ids[0];
    let transactions: Vec<NewTransaction> = (0..count)
        .map(|n| NewTransaction {
            provider_transaction_id: format!("t{n}"),
            transaction_type: TransactionType::Other,
            subtype: None,
            status: TransactionStatus::Settled,
            amount: "-1.00".parse().unwrap(),
            currency: "USD".to_owned(),
            description: Some(format!("line {n}")),
            symbol: None,
            security_name: None,
            quantity: None,
            unit_price: None,
            commission: None,
            transaction_date: chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap()
                + TimeDelta::days(i64::try_from(n % 28).unwrap()),
            settlement_date: None,
            pending_transaction_id: None,
            merchant_code: None,
        })
        .collect();
    store
        .upsert_transactions(account_id, &transactions, now())
        .await
        .unwrap();
    account_id
}

async fn count(pool: &sqlx::SqlitePool, sql: &str, user_id: Uuid) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(user_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn erasure_deletes_only_its_users_rows_and_resumes_after_a_lapsed_lease() {
    let (store, pool) = store().await;
    let erased = user(&store).await;
    let kept = user(&store).await;
    let erased_account = seeded(&store, erased, 15).await;
    let kept_account = seeded(&store, kept, 7).await;

    let at = now();
    let before = store
        .begin_user_erasure(
            &NewUserErasure {
                user_id: erased,
                requested_by: None,
                requested_at: at,
            },
            &[UserDeleted { user_id: erased }.event_at(at)],
        )
        .await
        .unwrap()
        .expect("begun");
    assert_eq!(before.email, format!("{erased}@example.com"));
    // Begun once only; the email is free at once.
    let again = NewUserErasure {
        user_id: erased,
        requested_by: None,
        requested_at: at,
    };
    assert!(
        store
            .begin_user_erasure(&again, &[])
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .user_by_email(&format!("{erased}@example.com"))
            .await
            .unwrap()
            .is_none()
    );

    // The first worker deletes one batch, then "crashes".
    let lease = at + TimeDelta::seconds(60);
    assert_eq!(
        store
            .claim_user_erasure(Some(erased), "first", at, lease)
            .await
            .unwrap(),
        Some(erased)
    );
    assert_eq!(
        store
            .erase_user_batch(erased, "first", 4, lease)
            .await
            .unwrap(),
        Some(4)
    );
    // Nobody else takes it while the lease holds; once it lapses, the next worker does.
    assert_eq!(
        store
            .claim_user_erasure(None, "second", at, lease)
            .await
            .unwrap(),
        None
    );
    let later = lease + TimeDelta::seconds(1);
    let second_lease = later + TimeDelta::seconds(60);
    assert_eq!(
        store
            .claim_user_erasure(None, "second", later, second_lease)
            .await
            .unwrap(),
        Some(erased)
    );
    assert_eq!(
        store
            .erase_user_batch(erased, "first", 4, lease)
            .await
            .unwrap(),
        None,
        "the lapsed owner deletes nothing more"
    );
    let mut batches = 0;
    loop {
        let deleted = store
            .erase_user_batch(erased, "second", 4, second_lease)
            .await
            .unwrap()
            .expect("leased");
        assert!(deleted <= 4);
        if deleted == 0 {
            break;
        }
        batches += 1;
    }
    assert!(batches >= 3, "{batches} batches");
    assert!(
        !store
            .finish_user_erasure(erased, "first", later)
            .await
            .unwrap()
    );
    assert!(
        store
            .finish_user_erasure(erased, "second", later)
            .await
            .unwrap()
    );

    assert!(store.user_by_id(erased).await.unwrap().is_none());
    let record = store.user_erasure(erased).await.unwrap().expect("kept");
    assert_eq!(record.finished_at, Some(later));
    assert!(record.deleted_rows >= 15, "{record:?}");
    assert_eq!(
        count(
            &pool,
            "SELECT COUNT(*) FROM transactions WHERE account_id = $1",
            erased_account
        )
        .await,
        0
    );
    let events: Vec<String> = sqlx::query_scalar("SELECT type FROM events WHERE user_id = $1")
        .bind(erased)
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(events, ["user.deleted"]);
    // The other user is untouched.
    assert!(store.user_by_id(kept).await.unwrap().is_some());
    assert_eq!(
        count(
            &pool,
            "SELECT COUNT(*) FROM transactions WHERE account_id = $1",
            kept_account
        )
        .await,
        7
    );
    assert_eq!(store.user_roles(kept).await.unwrap(), [Role::User]);
    // Nothing left to claim.
    assert_eq!(
        store
            .claim_user_erasure(None, "third", later, second_lease)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn export_pages_are_keyset_and_scoped_to_the_user() {
    let (store, _pool) = store().await;
    let owner = user(&store).await;
    let other = user(&store).await;
    let account = seeded(&store, owner, 25).await;
    let _ = seeded(&store, other, 3).await;
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .export_transactions(owner, account, after, 10)
            .await
            .unwrap();
        seen.extend(page.iter().map(|transaction| transaction.id));
        match page.last() {
            Some(last) if page.len() == 10 => after = Some(TransactionPosition::of(last)),
            _ => break,
        }
    }
    assert_eq!(seen.len(), 25);
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), 25);
    assert!(
        store
            .export_transactions(other, account, None, 10)
            .await
            .unwrap()
            .is_empty(),
        "another user's account exports nothing"
    );
    let accounts = store.export_accounts(owner, None, 10).await.unwrap();
    assert_eq!(accounts.len(), 1);
    assert_eq!(accounts[0].id, account);
}
