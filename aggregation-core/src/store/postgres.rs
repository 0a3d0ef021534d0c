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
/// Serializes processes migrating one database at the same time.
const MIGRATION_LOCK: Option<&str> = Some("SELECT pg_advisory_xact_lock(7243100117)");

/// A store on PostgreSQL through sqlx.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: sqlx::PgPool,
}

impl PostgresStore {
    /// Wraps an existing pool. Call [`PostgresStore::migrate`] before use.
    pub fn new(pool: sqlx::PgPool) -> Self {
        Self { pool }
    }

    /// Connects to `postgres://…` with a pool of 16 connections that gives up after 5 s.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url).map_err(store_error)?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(store_error)?;
        Ok(Self { pool })
    }
}

impl_sql_store!(PostgresStore, sqlx::Postgres, "BEGIN");
impl_records_store!(PostgresStore, sqlx::Postgres, "BEGIN");
super::sql_admin::impl_admin_store!(PostgresStore, sqlx::Postgres, "BEGIN");
