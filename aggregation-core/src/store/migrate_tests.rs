//! A database migrated by the runner this crate had before `sqlx::migrate!` (table
//! `aggregation_migrations` with `version, description, applied_at`) upgrades cleanly: its
//! applied migrations count as applied, the pending ones run, and `migrate` stays repeatable.
//! Processes migrating one database at once take turns.

/// The versions of the migrations a backend's folder embeds (`sqlite` or `postgres`), in
/// order: every one of them is applied after an upgrade or a concurrent migration. Read from
/// the file names, as `sqlx::migrate!` does, since the numbers need not be contiguous.
fn embedded_versions(backend: &str) -> Vec<i64> {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let files = std::fs::read_dir(folder).expect("the migrations folder");
    let mut versions: Vec<i64> = files
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
        .map(|path| {
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            let digits = name.split('_').next().unwrap_or("");
            digits
                .parse()
                .expect("a migration file name starts with its version")
        })
        .collect();
    versions.sort_unstable();
    versions
}

/// How many migrations a backend's folder embeds.
fn embedded_migrations(backend: &str) -> i64 {
    i64::try_from(embedded_versions(backend).len()).expect("a small count")
}

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
        embedded_versions("sqlite")
    );
    assert!(applied.iter().all(|row| row.1 && row.2.len() == 48));
    // Tables and columns of the migrations applied after the upgrade exist.
    sqlx::query("SELECT transaction_count FROM accounts")
        .fetch_all(&pool)
        .await
        .unwrap();
    sqlx::query("SELECT state_digest, reauthorizes_connection_id FROM oauth_states")
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
    assert_eq!(applied, embedded_migrations("sqlite"));
}

/// Revoking a user's other sessions finds their refresh tokens by `user_id` through an index.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_finds_refresh_tokens_by_user_through_an_index() {
    let store = crate::store::SqliteStore::in_memory().await.unwrap();
    let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(
        "EXPLAIN QUERY PLAN UPDATE refresh_tokens SET revoked_at = $2 \
         WHERE revoked_at IS NULL AND user_id = $1",
    )
    .bind(uuid::Uuid::now_v7())
    .bind(chrono::Utc::now())
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert!(
        plan.iter()
            .any(|(_, _, _, detail)| detail.contains("refresh_tokens_user")),
        "{plan:?}"
    );
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
    let Some(url) = postgres_test_url() else {
        return;
    };
    let schema = format!("agg_migrate_{}", uuid::Uuid::new_v4().simple());
    let options = PgConnectOptions::from_str(&url)
        .unwrap()
        .options([("search_path", schema.as_str())]);
    let case = async {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await
            .unwrap();
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
            embedded_versions("postgres")
        );
        assert!(applied.iter().all(|row| row.1 && row.2.len() == 48));
        sqlx::query("SELECT transaction_count FROM accounts")
            .fetch_all(&pool)
            .await
            .unwrap();
        sqlx::query("SELECT state_digest, reauthorizes_connection_id FROM oauth_states")
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
        assert_eq!(applied, embedded_migrations("postgres"));
        pool.close().await;
    };
    with_scratch(
        &url,
        format!("CREATE SCHEMA {schema}"),
        format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
        case,
    )
    .await;
}

/// `AGG_TEST_DATABASE_URL`; `None`, after saying the case is skipped, when it is unset.
#[cfg(feature = "postgres")]
pub(super) fn postgres_test_url() -> Option<String> {
    let url = std::env::var("AGG_TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty());
    if url.is_none() {
        eprintln!("skipping PostgreSQL case: AGG_TEST_DATABASE_URL is not set");
    }
    url
}

/// Runs `create` through `url`, then `case`, then `drop`, also when the case panics: the scratch
/// schema or database of one PostgreSQL case.
#[cfg(feature = "postgres")]
pub(super) async fn with_scratch(
    url: &str,
    create: String,
    drop: String,
    case: impl std::future::Future<Output = ()>,
) {
    let admin = sqlx::PgPool::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(create))
        .execute(&admin)
        .await
        .unwrap();
    let outcome = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(case)).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Runs `case` with the URL of a fresh PostgreSQL database, dropped after it. The schema tests
/// need whole databases: the default schema and `public` are per database.
#[cfg(feature = "postgres")]
async fn with_fresh_database<F, Fut>(case: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    use std::str::FromStr as _;

    use sqlx::ConnectOptions as _;
    use sqlx::postgres::PgConnectOptions;

    let Some(url) = postgres_test_url() else {
        return;
    };
    let name = format!("agg_schema_{}", uuid::Uuid::new_v4().simple());
    let fresh = PgConnectOptions::from_str(&url)
        .unwrap()
        .database(&name)
        .to_url_lossy()
        .to_string();
    with_scratch(
        &url,
        format!("CREATE DATABASE {name}"),
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        case(fresh),
    )
    .await;
}

#[cfg(feature = "postgres")]
fn new_user(email: &str) -> crate::store::NewUser {
    crate::store::NewUser {
        id: uuid::Uuid::now_v7(),
        email: email.to_owned(),
        email_normalized: email.to_owned(),
        password_hash: "x".to_owned(),
        created_at: crate::store::now(),
    }
}

/// The tables of the schema, by name.
#[cfg(feature = "postgres")]
async fn tables_in(pool: &sqlx::PgPool, schema: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT table_name::TEXT FROM information_schema.tables WHERE table_schema = $1 \
         ORDER BY table_name",
    )
    .bind(schema)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_migrates_beside_the_hosts_own_users_table() {
    use crate::store::{PostgresStore, UserStore as _};

    with_fresh_database(|url| async move {
        let host = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::raw_sql(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, login TEXT NOT NULL); \
             INSERT INTO users VALUES (1, 'host-admin')",
        )
        .execute(&host)
        .await
        .unwrap();
        let store = PostgresStore::connect(&url).await.unwrap();
        store
            .migrate()
            .await
            .expect("migrate beside the host's users");
        store.migrate().await.expect("migrate again");
        store
            .create_user(&new_user("someone@example.com"))
            .await
            .unwrap();

        let host_users: Vec<(i32, String)> = sqlx::query_as("SELECT id, login FROM public.users")
            .fetch_all(&host)
            .await
            .unwrap();
        assert_eq!(host_users, [(1, "host-admin".to_owned())]);
        assert_eq!(tables_in(&host, "public").await, ["users"]);
        let ours = tables_in(&host, "aggregation").await;
        assert!(ours.iter().any(|table| table == "aggregation_migrations"));
        assert!(ours.iter().any(|table| table == "accounts"));
        let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM aggregation.users")
            .fetch_one(&host)
            .await
            .unwrap();
        assert_eq!(stored, 1);
        host.close().await;
        store.pool().close().await;
    })
    .await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_stores_in_two_schemas_of_one_database_are_isolated() {
    use crate::store::{PostgresStore, SchemaName, UserStore as _};

    with_fresh_database(|url| async move {
        let open = |schema: &'static str| {
            let url = url.clone();
            async move {
                let store = PostgresStore::builder(&url)
                    .schema(SchemaName::new(schema).unwrap())
                    .connect()
                    .await
                    .unwrap();
                store.migrate().await.unwrap();
                store
            }
        };
        let (first, second) = (open("tenant_one").await, open("tenant_two").await);
        let mine = new_user("same@example.com");
        let theirs = new_user("same@example.com");
        first.create_user(&mine).await.unwrap();
        second
            .create_user(&theirs)
            .await
            .expect("no clash across schemas");

        let found = |store: PostgresStore| async move {
            let user = store.user_by_email("same@example.com").await.unwrap();
            store.pool().close().await;
            user.map(|user| user.id)
        };
        assert_eq!(found(first).await, Some(mine.id));
        assert_eq!(found(second).await, Some(theirs.id));
        let host = sqlx::PgPool::connect(&url).await.unwrap();
        assert!(tables_in(&host, "aggregation").await.is_empty());
        assert!(tables_in(&host, "public").await.is_empty());
        host.close().await;
    })
    .await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_database_of_a_release_before_schemas_stays_in_public() {
    use crate::store::{PostgresStore, SchemaName, UserStore as _};

    with_fresh_database(|url| async move {
        // An earlier release: no search_path of its own, so its tables went to `public`.
        let earlier = PostgresStore::new(sqlx::PgPool::connect(&url).await.unwrap());
        earlier.migrate().await.unwrap();
        let user = new_user("before@example.com");
        earlier.create_user(&user).await.unwrap();
        earlier.pool().close().await;

        let upgraded = PostgresStore::connect(&url).await.unwrap();
        upgraded.migrate().await.expect("migrate the public tables");
        let found = upgraded.user_by_email("before@example.com").await.unwrap();
        assert_eq!(found.map(|found| found.id), Some(user.id));
        upgraded.pool().close().await;
        let host = sqlx::PgPool::connect(&url).await.unwrap();
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'aggregation')",
        )
        .fetch_one(&host)
        .await
        .unwrap();
        assert!(
            !exists,
            "no empty aggregation schema beside the public tables"
        );

        // Naming a schema explicitly starts afresh there instead.
        let moved = PostgresStore::builder(&url)
            .schema(SchemaName::new("aggregation").unwrap())
            .connect()
            .await
            .unwrap();
        moved.migrate().await.unwrap();
        assert!(
            moved
                .user_by_email("before@example.com")
                .await
                .unwrap()
                .is_none()
        );
        moved.pool().close().await;
        host.close().await;
    })
    .await;
}

#[cfg(feature = "postgres")]
#[test]
fn schema_names_are_plain_identifiers() {
    use crate::store::SchemaName;

    for good in ["aggregation", "_tenant", "t1", "public", &"a".repeat(63)] {
        assert_eq!(SchemaName::new(good).unwrap().as_str(), good);
    }
    let injections = [
        "",
        "1st",
        "pg_temp",
        "Upper",
        "a-b",
        "x\"; DROP TABLE users; --",
    ];
    for bad in injections.iter().copied().chain([&*"a".repeat(64)]) {
        assert!(SchemaName::new(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(SchemaName::default().as_str(), "aggregation");
}
