//! The SQLite store: the embedded default, and an in-memory database for tests and embedding.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::migrate::{Migration, migrations};
use super::sql::impl_sql_store;
use super::sql_records::impl_records_store;

const MIGRATIONS: &[Migration] = migrations!("sqlite":
    1 => "0001_auth",
    2 => "0002_records",
    3 => "0003_admin",
    4 => "0004_transaction_counts",
    5 => "0005_providers",
);
const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS aggregation_migrations (\
     version INTEGER PRIMARY KEY NOT NULL, description TEXT NOT NULL, applied_at TEXT NOT NULL)";
/// `BEGIN IMMEDIATE` already serializes migrating processes on SQLite.
const MIGRATION_LOCK: Option<&str> = None;

/// A store on SQLite through sqlx.
///
/// Every store call is bounded by the store timeout ([`SqliteStore::DEFAULT_TIMEOUT`] unless
/// opened with [`SqliteStore::connect_with_timeout`]): waiting for a pooled connection, and
/// waiting for another writer's lock (SQLite's busy timeout). A call that runs out of time fails
/// with [`StoreError::Unavailable`], which the API answers with 503.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: sqlx::SqlitePool,
}

impl SqliteStore {
    /// The store timeout of [`SqliteStore::connect`] and [`SqliteStore::in_memory`].
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

    /// Wraps an existing pool, whose own acquire and busy timeouts then bound store calls.
    /// Call [`SqliteStore::migrate`] before use.
    pub fn new(pool: sqlx::SqlitePool) -> Self {
        Self { pool }
    }

    /// Opens (creating when missing) a SQLite database from a URL such as
    /// `sqlite://data/aggregation.db?mode=rwc`, in WAL mode with foreign keys on, with the
    /// default store timeout.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with_timeout(url, Self::DEFAULT_TIMEOUT).await
    }

    /// Like [`SqliteStore::connect`], with `timeout` bounding both the wait for a pooled
    /// connection and the wait for a lock held by another writer.
    pub async fn connect_with_timeout(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(store_error)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(timeout);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(timeout)
            .connect_with(options)
            .await
            .map_err(store_error)?;
        Ok(Self { pool })
    }

    /// A fresh private in-memory database, migrated. One pinned connection keeps it alive and
    /// serializes access, which is what tests want.
    pub async fn in_memory() -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str("sqlite::memory:")
            .map_err(store_error)?
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(Self::DEFAULT_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(store_error)?;
        let store = Self { pool };
        store.migrate().await?;
        Ok(store)
    }
}

impl_sql_store!(SqliteStore, sqlx::Sqlite, "BEGIN IMMEDIATE");
impl_records_store!(SqliteStore, sqlx::Sqlite, "BEGIN IMMEDIATE");
super::sql_admin::impl_admin_store!(SqliteStore, sqlx::Sqlite, "BEGIN IMMEDIATE");
