//! The SQLite store: the embedded default, and an in-memory database for tests and embedding.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use sqlx::SqliteConnection;
use sqlx::migrate::{Migrate as _, MigrateError, Migrator};

use super::StoreError;
use super::backend::{Driver, SqlStore, sqlx_driver_methods};

/// SQLite's part of the generic store.
impl Driver for sqlx::Sqlite {
    /// A SQLite database is a file of the store's own: no schema to choose.
    type Schema = ();

    /// `BEGIN IMMEDIATE` takes the write lock at once, so a read-then-write transaction cannot
    /// fail to upgrade its lock.
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    const ONE_WRITER: bool = true;
    const LEGACY_MIGRATIONS_PROBE: &'static str = "SELECT COUNT(*) FROM pragma_table_info('aggregation_migrations') \
         WHERE name = 'applied_at'";
    /// The FTS5 index kept by triggers (`transactions_search`, external content on the
    /// table's rowid); the bound text is FTS5 query syntax made only of quoted words.
    const SEARCH_WORDS_OPEN: &'static str = " AND t.rowid IN (SELECT rowid FROM transactions_search \
         WHERE transactions_search MATCH ";
    /// `+` keeps the planner from reading the rowids first: the account's index gives the
    /// order, and each row is looked up in the list of hits (built once).
    const SEARCH_WORDS_SCAN_OPEN: &'static str = " AND +t.rowid IN (SELECT rowid FROM \
         transactions_search WHERE transactions_search MATCH ";
    const SEARCH_WORDS_CLOSE: &'static str = ")";
    const SEARCH_HITS_PROBE: Option<&'static str> = Some(
        "SELECT COUNT(*) FROM (SELECT rowid FROM transactions_search \
         WHERE transactions_search MATCH $1 LIMIT $2)",
    );
    /// Approximate beyond 15 significant digits, which no real amount bound needs.
    const DECIMAL_TYPE: &'static str = "REAL";
    /// Large: FTS5 flushes the words it collected at the end of every statement.
    const ROWS_PER_STATEMENT: usize = 1_000;
    const KEYS_PER_STATEMENT: usize = 1_000;
    /// Its planner probes the unique index per key of a joined `VALUES` list already (and
    /// it has no `LATERAL`).
    const LATERAL_KEY_PROBES: bool = false;

    fn migrator() -> Migrator {
        sqlx::migrate!("migrations/sqlite")
    }

    /// Nothing to prepare: `BEGIN IMMEDIATE` already serializes migrating processes, and the
    /// database is a file of the store's own (no schemas to create).
    async fn prepare_migration<'e>(
        _: &'e (),
        _: &'e mut SqliteConnection,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    async fn ensure_migrations_table<'e>(
        connection: &'e mut SqliteConnection,
        table: &'e str,
    ) -> Result<(), MigrateError> {
        connection.ensure_migrations_table(table).await
    }

    async fn run_migrations<'e>(
        migrator: &'e Migrator,
        connection: &'e mut SqliteConnection,
    ) -> Result<(), MigrateError> {
        migrator.run_direct(None, connection, false).await
    }

    sqlx_driver_methods!();
}

/// A store on SQLite through sqlx, in a database file of its own (the schema option of the
/// PostgreSQL store has no counterpart here: nothing else shares the file's table names).
///
/// Every store call is bounded by the store timeout ([`SqliteStore::DEFAULT_TIMEOUT`] unless
/// opened with [`SqliteStore::connect_with_timeout`]): waiting for a pooled connection, and
/// waiting for another writer's lock (SQLite's busy timeout). A call that runs out of time fails
/// with [`StoreError::Unavailable`], which the API answers with 503.
pub type SqliteStore = SqlStore<sqlx::Sqlite>;

impl SqliteStore {
    /// The store timeout of [`SqliteStore::connect`] and [`SqliteStore::in_memory`].
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

    /// Wraps an existing pool, whose own acquire and busy timeouts then bound store calls.
    /// Call [`SqliteStore::migrate`] before use.
    pub fn new(pool: sqlx::SqlitePool) -> Self {
        Self { pool, schema: () }
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
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(timeout);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(timeout)
            .connect_with(options)
            .await?;
        Ok(Self { pool, schema: () })
    }

    /// A fresh private in-memory database, migrated. One pinned connection keeps it alive and
    /// serializes access, which is what tests want.
    pub async fn in_memory() -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::from_str("sqlite::memory:")?.foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(Self::DEFAULT_TIMEOUT)
            .connect_with(options)
            .await?;
        let store = Self { pool, schema: () };
        store.migrate().await?;
        Ok(store)
    }
}
