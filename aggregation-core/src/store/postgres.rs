//! The PostgreSQL store.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::StoreError;

// The aggregate files below are written against these names; `sqlite.rs` includes the same
// files with its own (compiled once per backend, like a generic over the two).
type Db = sqlx::Postgres;
type Tx = sqlx::Transaction<'static, Db>;
type SqlStore = PostgresStore;
/// Starts a transaction that will write; row locks order the writers.
const BEGIN_WRITE: &str = "BEGIN";
/// Serializes processes migrating one database at the same time. A migration may rightly run
/// longer than the store timeout (an index on a large table), so its transaction lifts
/// `statement_timeout` first.
const MIGRATION_LOCK: Option<&str> =
    Some("SET LOCAL statement_timeout = 0; SELECT pg_advisory_xact_lock(7243100117)");
/// Counts the `applied_at` column, which only the former migration runner's table has.
const LEGACY_MIGRATIONS_PROBE: &str = "SELECT COUNT(*) FROM information_schema.columns \
     WHERE table_schema = current_schema() AND table_name = 'aggregation_migrations' \
     AND column_name = 'applied_at'";

fn migrator() -> sqlx::migrate::Migrator {
    sqlx::migrate!("migrations/postgres")
}

#[path = "sql_admin.rs"]
#[cfg_attr(
    feature = "sqlite",
    expect(clippy::duplicate_mod, reason = "SQLite includes it too")
)]
mod admin;
#[path = "sql_batches.rs"]
#[cfg_attr(
    feature = "sqlite",
    expect(clippy::duplicate_mod, reason = "SQLite includes it too")
)]
mod batches;
#[path = "sql_connections.rs"]
#[cfg_attr(
    feature = "sqlite",
    expect(clippy::duplicate_mod, reason = "SQLite includes it too")
)]
mod connections;
#[path = "sql_migrate.rs"]
#[cfg_attr(
    feature = "sqlite",
    expect(clippy::duplicate_mod, reason = "SQLite includes it too")
)]
mod migrate;
#[path = "sql_providers.rs"]
#[cfg_attr(
    feature = "sqlite",
    expect(clippy::duplicate_mod, reason = "SQLite includes it too")
)]
mod providers;
#[path = "sql_records.rs"]
#[cfg_attr(
    feature = "sqlite",
    expect(clippy::duplicate_mod, reason = "SQLite includes it too")
)]
mod records;
#[path = "sql_sessions.rs"]
#[cfg_attr(
    feature = "sqlite",
    expect(clippy::duplicate_mod, reason = "SQLite includes it too")
)]
mod sessions;
#[path = "sql_upserts.rs"]
#[cfg_attr(
    feature = "sqlite",
    expect(clippy::duplicate_mod, reason = "SQLite includes it too")
)]
mod upserts;
#[path = "sql_users.rs"]
#[cfg_attr(
    feature = "sqlite",
    expect(clippy::duplicate_mod, reason = "SQLite includes it too")
)]
mod users;

/// A store on PostgreSQL through sqlx.
///
/// Every store call is bounded by the store timeout ([`PostgresStore::DEFAULT_TIMEOUT`] unless
/// connected with [`PostgresStore::connect_with_timeout`]): waiting for a pooled connection
/// (which includes connecting to a server that does not answer), and each statement, through
/// the connection's `statement_timeout`. A call that runs out of time fails with
/// [`StoreError::Unavailable`], which the API answers with 503.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: sqlx::PgPool,
}

impl PostgresStore {
    /// The store timeout of [`PostgresStore::connect`].
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

    /// Wraps an existing pool, whose own acquire timeout and the server's `statement_timeout`
    /// then bound store calls. Call [`PostgresStore::migrate`] before use.
    pub fn new(pool: sqlx::PgPool) -> Self {
        Self { pool }
    }

    /// Connects to `postgres://…` with a pool of 16 connections and the default store timeout.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with_timeout(url, Self::DEFAULT_TIMEOUT).await
    }

    /// Like [`PostgresStore::connect`], with `timeout` bounding both the wait for a pooled
    /// connection and every statement (`statement_timeout`, set when a connection opens).
    pub async fn connect_with_timeout(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        // Zero would mean "no limit" to PostgreSQL.
        let millis = timeout.as_millis().max(1);
        let options = PgConnectOptions::from_str(url)?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(timeout)
            .after_connect(move |connection, _| {
                Box::pin(async move {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                        "SET statement_timeout = {millis}"
                    )))
                    .execute(connection)
                    .await
                    .map(drop)
                })
            })
            .connect_with(options)
            .await?;
        Ok(Self { pool })
    }
}
