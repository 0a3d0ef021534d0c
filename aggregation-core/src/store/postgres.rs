//! The PostgreSQL store, in a schema of its own (`aggregation` unless told otherwise) so that
//! its generic table names (`users`, `sessions`, `accounts`, ...) never meet the host's tables.

use std::str::FromStr as _;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use sqlx::PgConnection;
use sqlx::migrate::{Migrate as _, MigrateError, Migrator};

use super::StoreError;
use super::backend::{Driver, SqlStore, sqlx_driver_methods};

/// PostgreSQL's part of the generic store.
impl Driver for sqlx::Postgres {
    /// The schema `migrate` creates; `None` for a pool the embedder set up.
    type Schema = Option<SchemaName>;

    /// Row locks order the writers.
    const BEGIN_WRITE: &'static str = "BEGIN";
    const ONE_WRITER: bool = false;
    const LEGACY_MIGRATIONS_PROBE: &'static str = "SELECT COUNT(*) FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = 'aggregation_migrations' \
         AND column_name = 'applied_at'";
    /// The GIN index `transactions_search` is on exactly this expression; `plainto_tsquery`
    /// reads the bound text as plain words (quotes are punctuation to it).
    /// ASCII punctuation is turned into spaces first, so that the parser splits every word
    /// the way the query's words were split (no host names, no hyphenated words).
    const SEARCH_WORDS_OPEN: &'static str = " AND to_tsvector('simple', translate(\
         coalesce(t.description, '') || ' ' || coalesce(t.merchant_name, '') || ' ' \
         || coalesce(t.notes, ''), \
         '!\"#$%&''()*+,-./:;<=>?@[\\]^_`{|}~', '                                ')) \
         @@ plainto_tsquery('simple', ";
    const SEARCH_WORDS_SCAN_OPEN: &'static str = Self::SEARCH_WORDS_OPEN;
    const SEARCH_WORDS_CLOSE: &'static str = ")";
    /// The planner estimates the words' frequency from the index expression's statistics.
    const SEARCH_HITS_PROBE: Option<&'static str> = None;
    const DECIMAL_TYPE: &'static str = "NUMERIC";
    /// Small enough that a statement's Bind message (about 250 bytes a transaction row)
    /// stays well below the 16 KiB a TCP socket's send buffer holds by default on Linux, with
    /// room for long descriptions. sqlx 0.9 leaves Nagle's algorithm on: the part of a message
    /// that does not fit waits for the server's delayed acknowledgement, about 40 ms a
    /// statement (two thirds of the 19 s that 50,000 rows took over loopback at 470 rows a
    /// statement).
    const ROWS_PER_STATEMENT: usize = 32;
    /// About 60 bytes a key in the Bind message: 128 keys stay below 8 KiB.
    const KEYS_PER_STATEMENT: usize = 128;
    /// Its planner, with statistics older than an import, would hash the whole account.
    const LATERAL_KEY_PROBES: bool = true;

    fn migrator() -> Migrator {
        sqlx::migrate!("migrations/postgres")
    }

    /// Serializes processes migrating one database at the same time, then creates the store's
    /// schema (the lock first: two `CREATE SCHEMA IF NOT EXISTS` at once can still collide). A
    /// migration may rightly run longer than the store timeout (an index on a large table), so
    /// the transaction lifts `statement_timeout` first.
    async fn prepare_migration<'e>(
        schema: &'e Option<SchemaName>,
        connection: &'e mut PgConnection,
    ) -> Result<(), StoreError> {
        sqlx::raw_sql("SET LOCAL statement_timeout = 0; SELECT pg_advisory_xact_lock(7243100117)")
            .execute(&mut *connection)
            .await?;
        if let Some(schema) = schema {
            let create = format!("CREATE SCHEMA IF NOT EXISTS {}", schema.quoted());
            sqlx::raw_sql(sqlx::AssertSqlSafe(create))
                .execute(&mut *connection)
                .await?;
        }
        Ok(())
    }

    async fn ensure_migrations_table<'e>(
        connection: &'e mut PgConnection,
        table: &'e str,
    ) -> Result<(), MigrateError> {
        connection.ensure_migrations_table(table).await
    }

    async fn run_migrations<'e>(
        migrator: &'e Migrator,
        connection: &'e mut PgConnection,
    ) -> Result<(), MigrateError> {
        migrator.run_direct(None, connection, false).await
    }

    sqlx_driver_methods!();
}

/// The PostgreSQL schema holding the store's tables and its migration table
/// (`aggregation_migrations`): 1 to 63 characters of `a-z`, `0-9` and `_`, not starting with a
/// digit or `pg_`, so it is always a plain identifier and never carries SQL. SQLite has no such
/// option: a `SqliteStore` keeps its tables in its own file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SchemaName(String);

/// A schema name outside the rules of [`SchemaName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid schema name {0:?}: expected 1 to 63 of a-z, 0-9 and _, not starting with a digit \
     or pg_"
)]
pub struct InvalidSchemaName(String);

impl SchemaName {
    /// The schema of [`PostgresStore::connect`]: `aggregation`.
    pub const DEFAULT: &str = "aggregation";

    /// Checks `name` against the rules of [`SchemaName`].
    pub fn new(name: &str) -> Result<Self, InvalidSchemaName> {
        let mut chars = name.chars();
        let valid = name.len() <= 63
            && chars
                .next()
                .is_some_and(|first| first.is_ascii_lowercase() || first == '_')
            && chars.all(|rest| rest.is_ascii_lowercase() || rest.is_ascii_digit() || rest == '_')
            && !name.starts_with("pg_");
        if valid {
            Ok(Self(name.to_owned()))
        } else {
            Err(InvalidSchemaName(name.to_owned()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as a quoted SQL identifier, so that even a reserved word such as `user` works.
    fn quoted(&self) -> String {
        format!("\"{}\"", self.0)
    }
}

impl Default for SchemaName {
    fn default() -> Self {
        Self(Self::DEFAULT.to_owned())
    }
}

impl std::str::FromStr for SchemaName {
    type Err = InvalidSchemaName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::new(name)
    }
}

/// A store on PostgreSQL through sqlx.
///
/// Every store call is bounded by the store timeout ([`PostgresStore::DEFAULT_TIMEOUT`] unless
/// connected with [`PostgresStore::connect_with_timeout`]): waiting for a pooled connection
/// (which includes connecting to a server that does not answer), and each statement, through
/// the connection's `statement_timeout`. A call that runs out of time fails with
/// [`StoreError::Unavailable`], which the API answers with 503.
///
/// Its tables live in one schema ([`SchemaName`], `aggregation` by default), which
/// [`PostgresStore::migrate`] creates: each pooled connection sets its `search_path` to that
/// schema alone, so the host's own tables in `public` (a `users` table, say) are never read,
/// written or clashed with, and several stores can share one database in different schemas.
/// A database migrated by a release before the schema option keeps its tables in `public`:
/// when the schema was not chosen explicitly, `aggregation` does not exist yet and
/// `public.aggregation_migrations` does, the store stays in `public` (and logs it). SQLite has
/// no schemas: a `SqliteStore` keeps its tables in its own file.
pub type PostgresStore = SqlStore<sqlx::Postgres>;

/// Options of a [`PostgresStore`] before it connects; from [`PostgresStore::builder`].
#[derive(Debug, Clone)]
pub struct PostgresStoreBuilder {
    url: String,
    schema: Option<SchemaName>,
    timeout: Duration,
}

impl PostgresStoreBuilder {
    /// Keeps the tables in `schema` instead of `aggregation` (and never falls back to the
    /// `public` tables of an earlier release: name `public` to keep using those).
    pub fn schema(mut self, schema: SchemaName) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Bounds the wait for a pooled connection and every statement (`statement_timeout`) by
    /// `timeout` instead of [`PostgresStore::DEFAULT_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Connects a pool of 16 connections, each with the store timeout and its `search_path`
    /// set to the schema. Call [`PostgresStore::migrate`] before use.
    pub async fn connect(self) -> Result<PostgresStore, StoreError> {
        let options = PgConnectOptions::from_str(&self.url)?;
        let schema = match self.schema {
            Some(schema) => schema,
            None => default_schema(&options, self.timeout).await?,
        };
        // Zero would mean "no limit" to PostgreSQL.
        let millis = self.timeout.as_millis().max(1);
        let setup = format!(
            "SET statement_timeout = {millis}; SET search_path TO {}",
            schema.quoted()
        );
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(self.timeout)
            .after_connect(move |connection, _| {
                let setup = setup.clone();
                Box::pin(async move {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(setup))
                        .execute(connection)
                        .await
                        .map(drop)
                })
            })
            .connect_with(options)
            .await?;
        Ok(PostgresStore {
            pool,
            schema: Some(schema),
        })
    }
}

/// `aggregation`, unless the database holds the tables of a release before the schema option
/// in `public` and no `aggregation` schema: then `public`, so that such a database keeps
/// working as it is.
async fn default_schema(
    options: &PgConnectOptions,
    timeout: Duration,
) -> Result<SchemaName, StoreError> {
    let probe = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(timeout)
        .connect_with(options.clone())
        .await?;
    let legacy: Result<bool, sqlx::Error> = sqlx::query_scalar(
        "SELECT to_regclass('public.aggregation_migrations') IS NOT NULL \
         AND NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
    )
    .bind(SchemaName::DEFAULT)
    .fetch_one(&probe)
    .await;
    probe.close().await;
    if !legacy? {
        return Ok(SchemaName::default());
    }
    tracing::warn!(
        "the store's tables are in schema public, where a release before the schema option \
         created them; they stay there (choose schema public explicitly to silence this)"
    );
    Ok(SchemaName("public".to_owned()))
}

impl PostgresStore {
    /// The store timeout of [`PostgresStore::connect`].
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

    /// Wraps an existing pool, whose own acquire timeout and the server's `statement_timeout`
    /// then bound store calls, and whose `search_path` says where the tables are (this store
    /// creates no schema). Call [`PostgresStore::migrate`] before use.
    pub fn new(pool: sqlx::PgPool) -> Self {
        Self { pool, schema: None }
    }

    /// Options for connecting to `postgres://…`: the schema and the store timeout.
    pub fn builder(url: &str) -> PostgresStoreBuilder {
        PostgresStoreBuilder {
            url: url.to_owned(),
            schema: None,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// Connects to `postgres://…` with a pool of 16 connections, the default store timeout and
    /// schema `aggregation` (see [`PostgresStore`] for a database of an earlier release).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder(url).connect().await
    }

    /// Like [`PostgresStore::connect`], with `timeout` bounding both the wait for a pooled
    /// connection and every statement (`statement_timeout`, set when a connection opens).
    pub async fn connect_with_timeout(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        Self::builder(url).timeout(timeout).connect().await
    }
}
