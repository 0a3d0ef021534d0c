//! A database migrated by the runner this crate had before `sqlx::migrate!` (table
//! `aggregation_migrations` with `version, description, applied_at`) upgrades cleanly: its
//! applied migrations count as applied, the pending ones run, and `migrate` stays repeatable.
//! Processes migrating one database at once take turns.

/// The migrations the former runner had applied in these tests, with their names there.
const APPLIED: [(i64, &str); 3] = [(1, "0001_auth"), (2, "0002_records"), (3, "0003_admin")];

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_database_of_the_former_runner_upgrades() {
    use crate::store::{SqliteStore, UserStore as _};

    const SQL: [&str; 3] = [
        include_str!("../../migrations/sqlite/0001_auth.sql"),
        include_str!("../../migrations/sqlite/0002_records.sql"),
        include_str!("../../migrations/sqlite/0003_admin.sql"),
    ];
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect("sqlite::memory:")
        .await
        .unwrap();
    sqlx::raw_sql(
        "CREATE TABLE aggregation_migrations (version INTEGER PRIMARY KEY NOT NULL, \
         description TEXT NOT NULL, applied_at TEXT NOT NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    for ((version, name), sql) in APPLIED.into_iter().zip(SQL) {
        sqlx::raw_sql(sql).execute(&pool).await.unwrap();
        sqlx::query("INSERT INTO aggregation_migrations VALUES ($1, $2, $3)")
            .bind(version)
            .bind(name)
            .bind(crate::store::now())
            .execute(&pool)
            .await
            .unwrap();
    }
    let store = SqliteStore::new(pool.clone());
    store.migrate().await.expect("upgrade the former table");
    store.migrate().await.expect("migrate again");

    let applied: Vec<(i64, bool, Vec<u8>)> = sqlx::query_as(
        "SELECT version, success, checksum FROM aggregation_migrations ORDER BY version",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        applied.iter().map(|row| row.0).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert!(applied.iter().all(|row| row.1 && row.2.len() == 48));
    // Tables and columns of the migrations applied after the upgrade exist.
    sqlx::query("SELECT transaction_count FROM accounts")
        .fetch_all(&pool)
        .await
        .unwrap();
    sqlx::query("SELECT state_digest FROM oauth_states")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(
        store
            .user_by_email("nobody@example.com")
            .await
            .unwrap()
            .is_none()
    );
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_processes_migrating_at_once_take_turns() {
    use crate::store::SqliteStore;

    let folder =
        std::env::temp_dir().join(format!("agg-migrate-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&folder).unwrap();
    let url = format!("sqlite://{}?mode=rwc", folder.join("shared.db").display());
    let first = SqliteStore::connect(&url).await.unwrap();
    let second = SqliteStore::connect(&url).await.unwrap();
    let (one, two) = tokio::join!(first.migrate(), second.migrate());
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM aggregation_migrations")
        .fetch_one(first.pool())
        .await
        .unwrap();
    first.pool().close().await;
    second.pool().close().await;
    let _ = std::fs::remove_dir_all(folder);
    one.unwrap();
    two.unwrap();
    assert_eq!(applied, 5);
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_database_of_the_former_runner_upgrades() {
    use std::str::FromStr as _;

    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

    use crate::store::{PostgresStore, UserStore as _};

    const SQL: [&str; 3] = [
        include_str!("../../migrations/postgres/0001_auth.sql"),
        include_str!("../../migrations/postgres/0002_records.sql"),
        include_str!("../../migrations/postgres/0003_admin.sql"),
    ];
    let Some(url) = std::env::var("AGG_TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
    else {
        eprintln!("skipping PostgreSQL case: AGG_TEST_DATABASE_URL is not set");
        return;
    };
    let schema = format!("agg_migrate_{}", uuid::Uuid::new_v4().simple());
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .unwrap();
    let options = PgConnectOptions::from_str(&url)
        .unwrap()
        .options([("search_path", schema.as_str())]);
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options)
        .await
        .unwrap();
    let case = async {
        sqlx::raw_sql(
            "CREATE TABLE aggregation_migrations (version BIGINT PRIMARY KEY, \
             description TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)",
        )
        .execute(&pool)
        .await
        .unwrap();
        for ((version, name), sql) in APPLIED.into_iter().zip(SQL) {
            sqlx::raw_sql(sql).execute(&pool).await.unwrap();
            sqlx::query("INSERT INTO aggregation_migrations VALUES ($1, $2, $3)")
                .bind(version)
                .bind(name)
                .bind(crate::store::now())
                .execute(&pool)
                .await
                .unwrap();
        }
        let store = PostgresStore::new(pool.clone());
        store.migrate().await.expect("upgrade the former table");
        store.migrate().await.expect("migrate again");

        let applied: Vec<(i64, bool, Vec<u8>)> = sqlx::query_as(
            "SELECT version, success, checksum FROM aggregation_migrations ORDER BY version",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(
            applied.iter().map(|row| row.0).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        assert!(applied.iter().all(|row| row.1 && row.2.len() == 48));
        sqlx::query("SELECT transaction_count FROM accounts")
            .fetch_all(&pool)
            .await
            .unwrap();
        sqlx::query("SELECT state_digest FROM oauth_states")
            .fetch_all(&pool)
            .await
            .unwrap();
        assert!(
            store
                .user_by_email("nobody@example.com")
                .await
                .unwrap()
                .is_none()
        );

        // Processes migrating an empty schema at once take turns.
        let recreate = format!("DROP SCHEMA {schema} CASCADE; CREATE SCHEMA {schema}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(recreate))
            .execute(&pool)
            .await
            .unwrap();
        let other = PostgresStore::new(pool.clone());
        let (one, two) = tokio::join!(store.migrate(), other.migrate());
        one.unwrap();
        two.unwrap();
        let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM aggregation_migrations")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(applied, 5);
    };
    // Drop the schema also when the case fails.
    let outcome = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(case)).await;
    pool.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE"
    )))
    .execute(&admin)
    .await
    .unwrap();
    admin.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
