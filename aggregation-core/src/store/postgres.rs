//! The PostgreSQL store.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::migrate::{Migration, migrations};
use super::sql::impl_sql_store;
use super::sql_records::impl_records_store;

const MIGRATIONS: &[Migration] = migrations!("postgres":
    1 => "0001_auth",
    2 => "0002_records",
    3 => "0003_admin",
    4 => "0004_transaction_counts",
    5 => "0005_providers",
);
const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS aggregation_migrations (\
     version BIGINT PRIMARY KEY, description TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)";
/// Serializes processes migrating one database at the same time. A migration may rightly run
/// longer than the store timeout (an index on a large table), so its transaction lifts
/// `statement_timeout` first.
const MIGRATION_LOCK: Option<&str> =
    Some("SET LOCAL statement_timeout = 0; SELECT pg_advisory_xact_lock(7243100117)");

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
        let options = PgConnectOptions::from_str(url).map_err(store_error)?;
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
            .await
            .map_err(store_error)?;
        Ok(Self { pool })
    }
}

impl_sql_store!(PostgresStore, sqlx::Postgres, "BEGIN");
impl_records_store!(PostgresStore, sqlx::Postgres, "BEGIN");
super::sql_admin::impl_admin_store!(PostgresStore, sqlx::Postgres, "BEGIN");
